#include "rdmactor/transport/fabric.hpp"

#include "common/logging.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/options.hpp"
#include "transport/shared_receives.hpp"
#include "transport/soft/soft_fabric.hpp"
#ifdef RDMACTOR_HAVE_VERBS
#  include "transport/verbs/verbs_fabric.hpp"
#endif

namespace rdmactor::transport {

errc to_errc(wc_status x) noexcept {
  switch (x) {
    case wc_status::success:
      return errc::none;
    case wc_status::local_length_error:
      return errc::local_length_error;
    case wc_status::local_protection_error:
      return errc::local_protection_error;
    case wc_status::remote_access_error:
      return errc::remote_access_error;
    case wc_status::remote_operation_error:
      return errc::remote_operation_error;
    case wc_status::rnr_retry_exceeded:
      return errc::rnr_retry_exceeded;
    case wc_status::transport_retry_exceeded:
      return errc::transport_retry_exceeded;
    case wc_status::work_request_flushed:
      return errc::work_request_flushed;
    case wc_status::general_error:
      return errc::completion_error;
  }
  return errc::completion_error;
}

caf::expected<device_ptr> open_device(const options& opts) {
  if (opts.fabric == "soft")
    return soft::open_device(opts);
#ifdef RDMACTOR_HAVE_VERBS
  if (opts.fabric == "verbs")
    return verbs::open_device(opts);
  if (opts.fabric == "auto") {
    if (verbs::devices_present())
      return verbs::open_device(opts);
    log().info("fabric=auto: no RDMA device found, using the soft fabric");
    return soft::open_device(opts);
  }
#else
  if (opts.fabric == "verbs")
    return make_error(errc::fabric_unavailable,
                      "this rdmactor was built without verbs support "
                      "(RDMACTOR_VERBS=OFF); rebuild with libibverbs-dev and "
                      "librdmacm-dev installed, or use fabric=soft");
  if (opts.fabric == "auto")
    return soft::open_device(opts);
#endif
  return make_error(errc::invalid_argument,
                    "fabric must be soft, verbs or auto (got '" + opts.fabric
                        + "')");
}

caf::expected<std::shared_ptr<shared_receives>>
share_receives(const device_ptr& dev, const options& opts) {
  return shared_receives::open(dev, {receive_buffer_bytes(opts),
                                     opts.srq_chunk_receives,
                                     opts.srq_max_receives});
}

caf::expected<std::pair<std::string, uint16_t>>
parse_address(const std::string& host_port) {
  auto bad = [&](const char* why) {
    return make_error(errc::invalid_address,
                      "'" + host_port + "': " + why
                          + "; expected HOST:PORT, e.g. 127.0.0.1:7471");
  };
  std::string host;
  std::string port_str;
  if (!host_port.empty() && host_port.front() == '[') {
    auto close = host_port.find(']');
    if (close == std::string::npos || close + 1 >= host_port.size()
        || host_port[close + 1] != ':')
      return bad("unterminated IPv6 literal");
    host = host_port.substr(1, close - 1);
    port_str = host_port.substr(close + 2);
  } else {
    auto colon = host_port.rfind(':');
    if (colon == std::string::npos)
      return bad("missing ':PORT'");
    host = host_port.substr(0, colon);
    port_str = host_port.substr(colon + 1);
  }
  if (host.empty())
    return bad("empty host");
  if (port_str.empty() || port_str.size() > 5
      || port_str.find_first_not_of("0123456789") != std::string::npos)
    return bad("port is not a number");
  auto port = std::stoul(port_str);
  if (port > 65535)
    return bad("port out of range 0..65535");
  return std::make_pair(host, static_cast<uint16_t>(port));
}

} // namespace rdmactor::transport
