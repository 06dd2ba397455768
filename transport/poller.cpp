#include "transport/poller.hpp"

#include <cerrno>
#include <cstdint>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/logging.hpp"
#include "common/thread_name.hpp"

namespace rdmactor::transport {

cq_poller::cq_poller(queue_pair& qp, std::function<void()> on_event)
    : qp_(qp), on_event_(std::move(on_event)) {
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { run(); });
}

cq_poller::~cq_poller() {
  uint64_t one = 1;
  if (stop_fd_ >= 0 && ::write(stop_fd_, &one, sizeof(one)) < 0)
    log().error("cq_poller: cannot signal stop: errno {}", errno);
  if (thread_.joinable())
    thread_.join();
  if (stop_fd_ >= 0)
    ::close(stop_fd_);
}

void cq_poller::run() {
  name_this_thread("rdm.cq.poller");
  pollfd fds[2];
  fds[0] = pollfd{qp_.cq_fd(), POLLIN, 0};
  fds[1] = pollfd{stop_fd_, POLLIN, 0};
  for (;;) {
    fds[0].revents = fds[1].revents = 0;
    auto rc = ::poll(fds, 2, -1);
    if (rc < 0) {
      if (errno == EINTR)
        continue;
      log().error("cq_poller: poll failed: errno {}", errno);
      return;
    }
    if (fds[1].revents != 0)
      return;
    if (fds[0].revents & (POLLERR | POLLNVAL)) {
      log().error("cq_poller: CQ fd reported an error; stopping");
      on_event_();
      return;
    }
    if ((fds[0].revents & POLLIN) && qp_.ack_cq_event())
      on_event_();
  }
}

} // namespace rdmactor::transport
