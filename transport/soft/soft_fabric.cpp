#include "transport/soft/soft_fabric.hpp"

#include "common/error.hpp"

namespace rdmactor::transport::soft {

// Placeholder until the soft fabric lands (issue 3).
caf::expected<device_ptr> open_device(const options&) {
  return make_error(errc::fabric_unavailable, "soft fabric not built yet");
}

} // namespace rdmactor::transport::soft
