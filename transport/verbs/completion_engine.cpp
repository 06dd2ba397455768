#include "transport/verbs/completion_engine.hpp"

#include <cerrno>
#include <new>
#include <system_error>

#include <poll.h>
#include <sys/eventfd.h>

#include "common/logging.hpp"
#include "common/thread_name.hpp"
#include "rdmactor/error.hpp"
#include "transport/verbs/cm.hpp"

namespace rdmactor::transport::verbs {

namespace {

/// Events taken from the channel before the functions are called; an id
/// that occurs twice in a batch (send and receive CQ) is called once.
constexpr int event_batch = 32;

} // namespace

caf::expected<std::unique_ptr<completion_engine>>
completion_engine::start(ibv_context* ctx, std::string device_name) {
  std::unique_ptr<completion_engine> engine{new completion_engine};
  engine->device_name_ = std::move(device_name);
  engine->channel_.reset(ibv_create_comp_channel(ctx));
  if (!engine->channel_)
    return make_error(errc::fabric_unavailable,
                      "ibv_create_comp_channel on " + engine->device_name_
                          + " failed: " + errno_text(errno));
  if (!set_nonblocking(engine->channel_->fd))
    return make_error(errc::fabric_unavailable,
                      "cannot make the completion channel non-blocking: "
                          + errno_text(errno));
  engine->stop_fd_ = unique_fd{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  if (!engine->stop_fd_)
    return make_error(errc::fabric_unavailable,
                      "eventfd failed: " + errno_text(errno));
  try {
    engine->thread_ = std::thread([raw = engine.get()] { raw->run(); });
  } catch (const std::system_error& e) {
    return make_error(errc::fabric_unavailable,
                      std::string{"cannot start the verbs completion "
                                  "engine: "}
                          + e.what());
  }
  engine->thread_id_ = engine->thread_.get_id();
  return engine;
}

completion_engine::~completion_engine() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stopping_ = true;
    }
    uint64_t one = 1;
    if (::write(stop_fd_.get(), &one, sizeof(one)) < 0)
      log().error("verbs: cannot stop the completion engine: {}",
                  errno_text(errno));
    thread_.join();
  }
  std::lock_guard<std::mutex> guard{mtx_};
  if (!fns_.empty())
    log().error("verbs: completion engine of {} destroyed with {} "
                "registrations left",
                device_name_, fns_.size());
}

completion_engine::registration completion_engine::add(notify_fn fn) {
  auto ptr = std::make_shared<const notify_fn>(std::move(fn));
  std::lock_guard<std::mutex> guard{mtx_};
  auto id = next_id_++;
  fns_.emplace(id, std::move(ptr));
  return registration{this, id};
}

void completion_engine::set(uint64_t id, notify_fn fn) {
  auto ptr = std::make_shared<const notify_fn>(std::move(fn));
  std::lock_guard<std::mutex> guard{mtx_};
  if (auto i = fns_.find(id); i != fns_.end())
    i->second.swap(ptr);
  // The old function (now in ptr) goes after the lock is released.
}

void completion_engine::remove(uint64_t id) noexcept {
  std::shared_ptr<const notify_fn> old;
  std::unique_lock<std::mutex> guard{mtx_};
  if (auto i = fns_.find(id); i != fns_.end()) {
    old = std::move(i->second);
    fns_.erase(i);
  }
  if (!on_engine_thread())
    idle_.wait(guard, [&] { return running_ != id; });
  guard.unlock();
  // `old` goes here, outside the lock (when the engine thread holds no
  // copy of it, this destroys the function).
}

void completion_engine::notify_soon(uint64_t id) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    soon_.push_back(id);
  }
  uint64_t one = 1;
  if (::write(stop_fd_.get(), &one, sizeof(one)) < 0)
    log().error("verbs: cannot wake the completion engine of {}: {}",
                device_name_, errno_text(errno));
}

void completion_engine::release(std::shared_ptr<void> last) noexcept {
  if (!on_engine_thread() || last.use_count() != 1)
    return; // `last` goes here (and with it, maybe, this engine)
  // On the heap first: should no thread start, nothing drops it here.
  if (auto* kept = new (std::nothrow) std::shared_ptr<void>(std::move(last))) {
    try {
      std::thread{[kept] { delete kept; }}.detach();
      return;
    } catch (const std::exception& e) {
      log().error("verbs: cannot start a thread to release {} ({})",
                  device_name_, e.what());
      last = std::move(*kept);
      delete kept;
    }
  }
  log().error("verbs: {} stays open: its last reference went on the "
              "completion engine's thread, which cannot release it",
              device_name_);
  // A cycle on purpose (the device owns this engine): it stays open.
  std::lock_guard<std::mutex> guard{mtx_};
  stranded_ = std::move(last);
}

void completion_engine::dispatch(uint64_t id) {
  std::shared_ptr<const notify_fn> fn;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = fns_.find(id);
    if (i == fns_.end())
      return; // deregistered: the event of a CQ being destroyed
    fn = i->second;
    running_ = id;
  }
  if (*fn)
    (*fn)();
  {
    std::lock_guard<std::mutex> guard{mtx_};
    running_ = 0;
  }
  idle_.notify_all();
  // `fn` goes here: when the function dropped the last reference to its
  // queue pair's owner, the queue pair deregistered without waiting and
  // this is the last copy.
}

void completion_engine::run() {
  name_this_thread("rdm.verbs.cq");
  pollfd fds[2] = {{channel_->fd, POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
  uint64_t ids[event_batch];
  for (;;) {
    fds[0].revents = fds[1].revents = 0;
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      log().error("verbs: completion engine of {}: poll failed: {}",
                  device_name_, errno_text(errno));
      return;
    }
    if (fds[1].revents != 0) {
      // Stop, or ids `notify_soon` asked for.
      uint64_t count = 0;
      if (::read(stop_fd_.get(), &count, sizeof(count)) < 0 && errno != EAGAIN)
        log().debug("verbs: completion engine of {}: reading its wake-up "
                    "failed: {}",
                    device_name_, errno_text(errno));
      std::vector<uint64_t> soon;
      {
        std::lock_guard<std::mutex> guard{mtx_};
        if (stopping_)
          return;
        soon.swap(soon_);
      }
      for (auto id : soon)
        dispatch(id);
    }
    if ((fds[0].revents & (POLLERR | POLLNVAL)) != 0) {
      log().error("verbs: completion engine of {}: the completion channel "
                  "reported an error; no more CQ notifications",
                  device_name_);
      return;
    }
    if (fds[0].revents == 0)
      continue;
    for (;;) {
      // Take a batch, acknowledging each event at once: an
      // ibv_destroy_cq never waits for this thread.
      int n = 0;
      ibv_cq* cq = nullptr;
      void* ctx = nullptr;
      while (n < event_batch
             && ibv_get_cq_event(channel_.get(), &cq, &ctx) == 0) {
        ibv_ack_cq_events(cq, 1);
        auto id = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ctx));
        bool seen = false;
        for (int i = 0; i < n && !seen; ++i)
          seen = ids[i] == id;
        if (!seen)
          ids[n++] = id;
      }
      if (n == 0)
        break;
      for (int i = 0; i < n; ++i)
        dispatch(ids[i]);
    }
  }
}

} // namespace rdmactor::transport::verbs
