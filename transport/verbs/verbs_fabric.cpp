#include "transport/verbs/verbs_fabric.hpp"

#include <infiniband/verbs.h>

#include "transport/verbs/raii.hpp"
#include "transport/verbs/verbs_device.hpp"

namespace rdmactor::transport::verbs {

bool devices_present() noexcept {
  int count = 0;
  device_list_ptr list{ibv_get_device_list(&count)};
  return list != nullptr && count > 0;
}

caf::expected<device_ptr> open_device(const options& opts) {
  auto dev = verbs_device::open(opts);
  if (!dev)
    return std::move(dev.error());
  return device_ptr{std::move(*dev)};
}

} // namespace rdmactor::transport::verbs
