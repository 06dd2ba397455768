#include "transport/soft/event_fd.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include <sys/eventfd.h>

#include "rdmactor/error.hpp"

namespace rdmactor::transport::soft {

caf::expected<event_fd> event_fd::make() {
  int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0)
    return make_error(errc::fabric_unavailable,
                      std::string{"soft fabric: eventfd failed: "}
                          + std::strerror(errno)
                          + "; raise the open-file limit (ulimit -n)");
  return event_fd{unique_fd{fd}};
}

void event_fd::signal() noexcept {
  uint64_t one = 1;
  // Fails only with EAGAIN when the counter is saturated: still readable.
  [[maybe_unused]] auto n = ::write(fd_.get(), &one, sizeof(one));
}

bool event_fd::drain() noexcept {
  uint64_t value = 0;
  return ::read(fd_.get(), &value, sizeof(value)) == sizeof(value);
}

} // namespace rdmactor::transport::soft
