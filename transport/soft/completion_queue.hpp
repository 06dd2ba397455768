#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>

#include "common/ring_deque.hpp"
#include "rdmactor/transport/fabric.hpp"
#include "transport/soft/event_fd.hpp"

namespace rdmactor::transport::soft {

/// The completion queue of one soft queue pair: a bounded FIFO of work
/// completions plus an eventfd that plays the completion channel.
///
/// Notification model (like `ibv_req_notify_cq`): `arm` requests one
/// notification; the next `push` of a completion of the armed kind signals
/// the eventfd and disarms.  If such completions are already queued when
/// `arm` is called, it signals at once,
/// so a completion that slipped in between the last poll and arming is never
/// missed.  `ack` consumes the signal.  With a notify function set, a
/// notification calls it instead of signalling the eventfd.  The eventfd
/// is created on the first `fd()` call only, so that owners with a notify
/// function (the transport actor) spend no descriptor on it.  Thread-safe.
class completion_queue {
public:
  completion_queue() = default;

  /// Appends `wc` and signals if armed.  Returns false (and drops `wc`)
  /// when `limits::max_cq_entries` are queued: a CQ overrun.
  bool push(const work_completion& wc);

  /// Moves up to `max` completions to `out`, oldest first; returns how
  /// many.
  size_t poll(work_completion* out, size_t max);

  /// Returns the eventfd that becomes readable on a notification, creating
  /// it on the first call; -1 when the system refuses an eventfd.
  int fd() const noexcept;

  /// Requests one notification for the next completion `which` names
  /// (`receives`: a receive or an unsuccessful completion; every inbound
  /// SEND counts as solicited).  Widens an armed `receives` to `all`.
  void arm(cq_events which = cq_events::all);

  /// Calls `fn` for each notification from now on instead of signalling the
  /// eventfd (see `queue_pair::set_cq_notify`).  Call before the first
  /// `arm`.
  void set_notify(std::function<void()> fn);

  /// Consumes a pending notification; returns false when none was pending.
  bool ack() noexcept;

private:
  /// Delivers one notification (the function, else the eventfd).  Called
  /// without the lock.
  void notify();

  mutable std::mutex mtx_;
  ring_deque<work_completion> entries_;
  bool armed_ = false;
  /// Armed for receives and failures only.
  bool receives_only_ = false;
  /// Created by the first `fd()`; guarded by mtx_.
  mutable std::optional<event_fd> efd_;
  /// A notification fired before the eventfd existed.
  mutable bool unsignalled_ = false;
  /// Set once before the first arm; read without the lock afterwards.
  std::function<void()> notify_;
};

} // namespace rdmactor::transport::soft
