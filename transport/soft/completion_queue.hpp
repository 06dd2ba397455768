#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

#include "transport/fabric.hpp"
#include "transport/soft/event_fd.hpp"

namespace rdmactor::transport::soft {

/// The completion queue of one soft queue pair: a bounded FIFO of work
/// completions plus an eventfd that plays the completion channel.
///
/// Notification model (like `ibv_req_notify_cq`): `arm` requests one
/// notification; the next `push` signals the eventfd and disarms.  If
/// completions are already queued when `arm` is called, it signals at once,
/// so a completion that slipped in between the last poll and arming is never
/// missed.  `ack` consumes the signal.  With a notify function set, a
/// notification calls it instead of signalling the eventfd.  Thread-safe.
class completion_queue {
public:
  explicit completion_queue(event_fd efd) noexcept : efd_(std::move(efd)) {}

  /// Appends `wc` and signals if armed.  Returns false (and drops `wc`)
  /// when `limits::max_cq_entries` are queued: a CQ overrun.
  bool push(const work_completion& wc);

  /// Moves up to `max` completions to `out`, oldest first; returns how
  /// many.
  size_t poll(work_completion* out, size_t max);

  /// Returns the eventfd that becomes readable on a notification.
  int fd() const noexcept {
    return efd_.fd();
  }

  /// Requests one notification.
  void arm();

  /// Calls `fn` for each notification from now on instead of signalling the
  /// eventfd (see `queue_pair::set_cq_notify`).  Call before the first
  /// `arm`.
  void set_notify(std::function<void()> fn);

  /// Consumes a pending notification; returns false when none was pending.
  bool ack() noexcept {
    return efd_.drain();
  }

private:
  /// Delivers one notification (the function, else the eventfd).  Called
  /// without the lock.
  void notify();

  std::mutex mtx_;
  std::deque<work_completion> entries_;
  bool armed_ = false;
  event_fd efd_;
  /// Set once before the first arm; read without the lock afterwards.
  std::function<void()> notify_;
};

} // namespace rdmactor::transport::soft
