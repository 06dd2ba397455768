#include "transport/soft/soft_fabric.hpp"

#include "rdmactor/error.hpp"
#include "transport/soft/soft_device.hpp"

namespace rdmactor::transport::soft {

caf::expected<device_ptr> open_device(const options& opts) {
  auto problem = validate(opts);
  if (!problem.empty())
    return make_error(errc::invalid_argument, problem);
  return device_ptr{std::make_shared<soft_device>(opts)};
}

} // namespace rdmactor::transport::soft
