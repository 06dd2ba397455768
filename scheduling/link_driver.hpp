#pragma once

// Drives one link (transport/link.hpp) for the actor that drives it now:
// when to poll, when to arm, and where the fabric's wake-ups go.  The
// transport actor owns every link (a `driven_link` in its state, from the
// open to the close); it drives a raw user's link itself, and lends a
// connection's to the agent, which drives it until it gives it back at its
// end (`lease_end_atom`, include/rdmactor/detail/transport_actor.hpp).  Not
// installed.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include <caf/fwd.hpp>
#include <caf/weak_intrusive_ptr.hpp>

#include "rdmactor/detail/completion_mode.hpp"
#include "transport/link.hpp"
#include "transport/poller.hpp"

namespace rdmactor::transport {

/// An owner that takes the CQ's notification without a message (the
/// agent's runner; see `wake_without_message` in direct_poll.hpp).
class direct_wake {
public:
  /// Called on the fabric's thread while the caller holds a strong
  /// reference to the owner: the armed notification fired.
  virtual void wake_notified() noexcept = 0;

protected:
  ~direct_wake() = default;
};

/// Where the fabric's wake-ups of a link go: the actor that drives it now.
/// Called on the fabric's threads (and a poller's).  Set twice at most in a
/// lent link's life, under its mutex: to the agent when it starts driving,
/// back to the transport when the agent gives the link back.
class wake_target {
public:
  /// Sends the wake-ups to `who` from now on (null: to nobody); `direct`
  /// (part of `who`, or null) takes the CQ's notification without a
  /// message.
  void set(caf::weak_actor_ptr who, direct_wake* direct = nullptr);

  /// Tells the driver that completions are ready: through `direct_wake`
  /// where it has one, else with `cq_event_atom`.
  void cq_event();
  /// Sends `(repost_atom, 0)` to the driver: receive buffers were released.
  void repost();

private:
  /// The driver, and its `direct_wake` (null when none or gone).
  caf::strong_actor_ptr driver(direct_wake** direct = nullptr);

  std::mutex mtx_;
  caf::weak_actor_ptr who_;
  direct_wake* direct_ = nullptr;
};

/// An opened link and its wake-up wiring, owned by the transport actor from
/// the open to the close (drivers only point at it).  Destroying it stops
/// the poller, then closes the queue pair.
struct driven_link {
  std::shared_ptr<link> path;
  std::shared_ptr<wake_target> target = std::make_shared<wake_target>();
  /// Only where the fabric cannot notify the driver itself.
  std::unique_ptr<cq_poller> poller;
  /// The link's wake and the CQ's notification lead to `target`.
  bool wired = false;

  ~driven_link() {
    poller.reset();
    path.reset();
  }
};

/// The completion logic of one link's owner: drains the CQ, keeps polling
/// or arms it (see completion_mode.hpp), and starts polling after a post.
///
/// Called only by the owning actor, from its activations.  A poll it wants
/// runs at the end of the activation: it sets the owner's flag (see
/// scheduling/direct_poll.hpp), which the owner's `resume` reads.
class link_driver {
public:
  /// Sets the polling mode and the owner's poll flag (which outlives this).
  void init(polling how, std::atomic<bool>* poll_wanted) noexcept {
    how_ = how;
    poll_wanted_ = poll_wanted;
  }

  /// Starts driving `dl`, which outlives the driving (until `stop`): `obs`
  /// hears the link's events, `driver` gets the fabric's wake-ups from now
  /// on (the CQ's notification through `direct`, when not null).  Arms the
  /// CQ (except in busy mode) and asks for a poll, which finds what came
  /// while nobody drove the link.
  void start(driven_link& dl, link_observer& obs, caf::weak_actor_ptr driver,
             direct_wake* direct = nullptr);

  /// Stops driving: the posts it held leave, its observer is cleared, and
  /// the link is the next driver's (wake-ups still reach this one until
  /// the next one starts).  Nothing when nothing is driven.
  void stop();

  /// A link is driven (`start` and no `stop` since).
  bool driving() const noexcept {
    return dl_ != nullptr;
  }

  /// No link, or it is down.
  bool down() const noexcept {
    return !dl_ || dl_->path->down();
  }

  /// The driven link; only while `driving()`.
  link& path() noexcept {
    return *dl_->path;
  }

  const polling& how() const noexcept {
    return how_;
  }

  /// Call after a submit that nobody waits for: in the polling modes,
  /// start polling now rather than wait for the completion event (a
  /// thread hand-off, on verbs also a system call to re-arm); otherwise,
  /// when the submit had to wait for a credit or a send-queue entry, arm
  /// for every completion (one armed for receives would not report the
  /// send completion that frees its entry).  A `quiet` submit (upkeep:
  /// `link::submit(..., quiet)`, a keepalive Ping or Pong) starts no
  /// polling: it is treated as in event mode, so that idle connections
  /// cost no polling tails.
  void posted(bool quiet = false);

  /// Call after a submit with a cookie: as `posted`; in event mode it
  /// widens an arming for receives only and polls once for a completion
  /// that came between the post and the arming.
  void requested();

  /// Handles every completion there is, then either asks for the next poll
  /// (see `keep_polling`) or arms the CQ.  Returns the completions handled.
  size_t drain();

  /// The armed notification fired: drains.
  size_t notified();

  /// Reposts released receive buffers (the link's wake).
  void reclaim();

  /// Asks for a poll at the end of this activation (nothing when down).
  void schedule_poll() noexcept;

  /// At the last look our polling threads mostly waited for a core
  /// (adaptive mode: then it arms as event mode does;
  /// scheduling/contention.hpp).
  bool contended() const noexcept {
    return contended_;
  }

private:
  size_t poll_link();
  bool keep_polling();

  /// Polls after posts and drains: a polling mode, and not contended.
  bool polling_now() const noexcept {
    return how_.mode != completion_mode::event && !contended_;
  }

  /// The link driven now (owned by the transport actor), or null.
  driven_link* dl_ = nullptr;
  polling how_;
  std::atomic<bool>* poll_wanted_ = nullptr;
  /// adaptive: the last completion or post, as of the last clock reading;
  /// polling goes on for poll_budget_us after it.
  std::chrono::steady_clock::time_point last_activity_;
  /// A completion or post since the last clock reading: the next reading
  /// stamps `last_activity_` (see tuning::polls_per_clock_read).
  bool active_since_reading_ = false;
  /// Polls since the last clock reading.
  uint32_t polls_since_reading_ = 0;
  /// Empty polls in a row (see tuning::empty_polls_per_yield).
  uint32_t empty_polls_ = 0;
  /// See `contended()`.
  bool contended_ = false;
};

/// `how`, or event mode where the scheduler's max-throughput is unbounded
/// (a polling actor must give its worker back); says so once per process.
polling usable_polling(caf::actor_system& sys, polling how);

} // namespace rdmactor::transport
