#include "transport/soft/event_loop.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <sys/epoll.h>

#include "common/logging.hpp"
#include "common/thread_name.hpp"
#include "rdmactor/error.hpp"
#include "transport/soft/soft_queue_pair.hpp"

namespace rdmactor::transport::soft {

namespace {

/// epoll events one epoll_wait returns at most.
constexpr int max_events = 64;

caf::error system_error(const char* what) {
  return make_error(errc::fabric_unavailable,
                    std::string{"soft fabric: "} + what + ": "
                        + std::strerror(errno)
                        + " (raise the open-file limit, `ulimit -n`, or "
                          "close connections)");
}

} // namespace

caf::expected<std::unique_ptr<event_loop>> event_loop::make() {
  unique_fd epfd{::epoll_create1(EPOLL_CLOEXEC)};
  if (!epfd)
    return system_error("cannot create an epoll set");
  auto wake = event_fd::make();
  if (!wake)
    return wake.error();
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr; // the wake eventfd
  if (::epoll_ctl(epfd.get(), EPOLL_CTL_ADD, wake->fd(), &ev) != 0)
    return system_error("cannot add the wake eventfd to the epoll set");
  std::unique_ptr<event_loop> loop{
      new event_loop(std::move(epfd), std::move(*wake))};
  try {
    loop->thread_ = std::thread{[p = loop.get()] { p->run(); }};
  } catch (const std::system_error& e) {
    return make_error(errc::fabric_unavailable,
                      std::string{"soft fabric: cannot start the event loop "
                                  "thread: "}
                          + e.what());
  }
  return loop;
}

event_loop::event_loop(unique_fd epfd, event_fd wake)
    : epfd_(std::move(epfd)), wake_(std::move(wake)) {}

event_loop::~event_loop() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stop_ = true;
    if (attached_ > 0)
      log().error("soft fabric: event loop destroyed with {} queue pairs "
                  "attached",
                  attached_);
  }
  wake_.signal();
  if (!thread_.joinable())
    return;
  if (std::this_thread::get_id() == thread_.get_id())
    thread_.detach(); // the last reference went on the loop itself
  else
    thread_.join();
}

caf::error event_loop::attach(soft_queue_pair* qp, loop_hook& hook, int fd) {
  if (std::this_thread::get_id() == thread_.get_id())
    return make_error(errc::invalid_argument,
                      "soft fabric: a queue pair cannot be attached from its "
                      "own event loop");
  hook.fd = fd;
  hook.interest = EPOLLIN;
  // Counted as attached before the socket is watched: from then on the
  // loop may service it, finish it and let go of it at once.
  {
    std::lock_guard<std::mutex> guard{mtx_};
    hook.detached = false;
    ++attached_;
  }
  epoll_event ev{};
  ev.events = hook.interest;
  ev.data.ptr = qp;
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    auto err = system_error("cannot add a socket to the epoll set");
    std::lock_guard<std::mutex> guard{mtx_};
    hook.detached = true;
    --attached_;
    return err;
  }
  wake(qp, hook);
  return {};
}

void event_loop::wake(soft_queue_pair* qp, loop_hook& hook) {
  bool signal = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (hook.detached || hook.queued)
      return;
    hook.queued = true;
    ready_.push_back(qp);
    if (sleeping_ && !signalled_) {
      signalled_ = true;
      signal = true;
    }
  }
  if (signal)
    wake_.signal();
}

void event_loop::detach_wait(loop_hook& hook) {
  std::unique_lock<std::mutex> guard{mtx_};
  detached_cv_.wait(guard, [&] { return hook.detached; });
}

size_t event_loop::attached() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return attached_;
}

void event_loop::set_timer(soft_queue_pair* qp, loop_hook& hook,
                           std::optional<time_point> at) {
  if (hook.has_timer) {
    if (at && hook.timer->first == *at)
      return;
    if (at) {
      // Moved to its new time in the node it has: no allocation.
      auto node = timers_.extract(hook.timer);
      node.key() = *at;
      hook.timer = timers_.insert(std::move(node));
      return;
    }
    timers_.erase(hook.timer);
    hook.has_timer = false;
    return;
  }
  if (at) {
    hook.timer = timers_.emplace(*at, qp);
    hook.has_timer = true;
  }
}

void event_loop::service(soft_queue_pair* qp, uint32_t revents,
                         std::vector<soft_queue_pair*>& next) {
  auto& hook = qp->hook();
  if (hook.finished)
    return;
  auto res = qp->service(revents);
  if (res.done) {
    ::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, hook.fd, nullptr);
    set_timer(qp, hook, std::nullopt);
    hook.finished = true;
    finished_.push_back(qp);
    return;
  }
  if (res.again) {
    next.push_back(qp);
    return;
  }
  if (res.interest != hook.interest) {
    epoll_event ev{};
    ev.events = res.interest;
    ev.data.ptr = qp;
    if (::epoll_ctl(epfd_.get(), EPOLL_CTL_MOD, hook.fd, &ev) == 0)
      hook.interest = res.interest;
    else
      log().error("soft fabric: epoll_ctl failed: {}", std::strerror(errno));
  }
  set_timer(qp, hook, res.deadline);
}

void event_loop::run() {
  name_this_thread("rdm.soft.loop");
  std::vector<soft_queue_pair*> batch;
  std::vector<soft_queue_pair*> next;
  epoll_event events[max_events];
  for (;;) {
    // Sleep until a socket, a wake or the earliest timer; not at all when
    // some queue pair still has work from the last round.
    int timeout = -1;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (stop_)
        return;
      if (!ready_.empty() || !next.empty()) {
        timeout = 0;
      } else {
        sleeping_ = true;
        if (!timers_.empty())
          timeout = poll_timeout_ms(timers_.begin()->first, clock_type::now());
      }
    }
    int n = ::epoll_wait(epfd_.get(), events, max_events, timeout);
    if (n < 0 && errno != EINTR) {
      log().error("soft fabric: epoll_wait failed: {}", std::strerror(errno));
      n = 0;
    }
    {
      std::lock_guard<std::mutex> guard{mtx_};
      sleeping_ = false;
      batch.swap(ready_);
      for (auto* qp : batch)
        qp->hook().queued = false;
    }
    batch.insert(batch.end(), next.begin(), next.end());
    next.clear();
    // Sockets first, then wakes, then timers: each queue pair's service
    // call recomputes everything, so duplicates only cost a call.
    for (int i = 0; i < n; ++i) {
      auto* qp = static_cast<soft_queue_pair*>(events[i].data.ptr);
      if (qp == nullptr) {
        wake_.drain();
        std::lock_guard<std::mutex> guard{mtx_};
        signalled_ = false;
        continue;
      }
      service(qp, events[i].events, next);
    }
    for (auto* qp : batch)
      service(qp, 0, next);
    batch.clear();
    // Expired timers: taken out first, so that a deadline a service call
    // sets in the past waits for the next round instead of looping here.
    auto now = clock_type::now();
    while (!timers_.empty() && timers_.begin()->first <= now) {
      auto* qp = timers_.begin()->second;
      qp->hook().has_timer = false;
      timers_.erase(timers_.begin());
      batch.push_back(qp);
    }
    for (auto* qp : batch)
      service(qp, 0, next);
    batch.clear();
    if (!finished_.empty()) {
      // Let go only now, when no list of this round refers to them any
      // more: the destructor may free a queue pair once it is detached.
      next.erase(std::remove_if(
                     next.begin(), next.end(),
                     [](soft_queue_pair* qp) { return qp->hook().finished; }),
                 next.end());
      {
        std::lock_guard<std::mutex> guard{mtx_};
        for (auto* qp : finished_) {
          auto& hook = qp->hook();
          if (hook.queued)
            ready_.erase(std::remove(ready_.begin(), ready_.end(), qp),
                         ready_.end());
          hook.detached = true;
          --attached_;
        }
      }
      finished_.clear();
      detached_cv_.notify_all();
    }
  }
}

} // namespace rdmactor::transport::soft
