#pragma once

// Internal to remote actors: the credit window of actor messages of one
// connection (EXT_ACTOR_FLOW), both directions.  No actor here: the
// router (actors/remote_actors.*) owns both halves and the agent carries
// ActorAck frames.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include <caf/error.hpp>

namespace rdmactor {

/// Whether a message of `size` bytes may join `in_messages` /
/// `in_bytes` in flight within a window of `window_messages` /
/// `window_bytes`.  A message larger than what the bytes window has left
/// goes while less than half of it is used (or nothing is in flight), so
/// one larger than the whole window is not stuck; the receiver returns
/// credit at half a window, so a blocked sender always gets an ActorAck.
/// Both sides use this rule: the sender to wait, the receiver to check.
bool actor_window_allows(uint64_t in_messages, uint64_t in_bytes, uint64_t size,
                         uint64_t window_messages,
                         uint64_t window_bytes) noexcept;

/// The sender's half: what went to the peer and what it acknowledged.
/// Guarded by the router's mutex.
struct actor_outflow {
  /// The peer offered EXT_ACTOR_FLOW (set when its Hello arrived).
  bool active = false;
  uint64_t window_messages = 0;
  uint64_t window_bytes = 0;
  uint64_t sent_messages = 0;
  uint64_t sent_bytes = 0;
  uint64_t acked_messages = 0;
  uint64_t acked_bytes = 0;

  /// Whether a counted message of `size` bytes may go now.
  bool allows(uint64_t size) const noexcept {
    return actor_window_allows(sent_messages - acked_messages,
                               sent_bytes - acked_bytes, size, window_messages,
                               window_bytes);
  }

  /// Takes the peer's cumulative ActorAck; an error (nothing changed) when
  /// it acks more than was sent or less than an earlier one.
  caf::error ack(uint64_t messages, uint64_t bytes);
};

/// The receiver's half (thread-safe): the peer's counted messages that
/// arrived, those the target actors took from their mailboxes (or that
/// were refused), and the credit returned.  The agent calls `admit` and
/// `take_ack`; `consumed` runs on any thread (the target's, when its
/// mailbox element goes).
class actor_inflow {
public:
  actor_inflow(uint64_t window_messages, uint64_t window_bytes);

  /// Sets who wakes the agent when credit is due (called once, before
  /// messages arrive); it runs on the consuming thread, outside the lock.
  void set_wakeup(std::function<void()> fn);

  /// The peer offered EXT_ACTOR_FLOW: credit is returned with ActorAck
  /// (otherwise the window is only a limit on what waits in mailboxes).
  void set_flow(bool on);

  /// A whole counted message of `bytes` arrived: an error
  /// (`quota_exceeded`, the agent disconnects the peer) when it exceeds
  /// the window, nothing counted then.
  caf::error admit(uint64_t bytes);

  /// One admitted message of `bytes` left its target's mailbox (or was
  /// refused).  Any thread.
  void consumed(uint64_t bytes);

  /// The credit to return now, if any: cumulative counts in `messages`
  /// and `bytes` (then recorded as returned).  The agent, when woken.
  bool take_ack(uint64_t& messages, uint64_t& bytes);

  /// Admitted messages not yet consumed, and the most there ever were.
  uint64_t buffered() const;
  uint64_t buffered_max() const;

  /// ActorAcks taken by `take_ack`.
  uint64_t acks() const;

private:
  const uint64_t window_messages_;
  const uint64_t window_bytes_;
  mutable std::mutex mtx_;
  std::function<void()> wakeup_;
  bool flow_ = false;
  bool wake_pending_ = false;
  uint64_t received_messages_ = 0;
  uint64_t received_bytes_ = 0;
  uint64_t consumed_messages_ = 0;
  uint64_t consumed_bytes_ = 0;
  uint64_t acked_messages_ = 0;
  uint64_t acked_bytes_ = 0;
  uint64_t buffered_max_ = 0;
  uint64_t acks_ = 0;
};

using actor_inflow_ptr = std::shared_ptr<actor_inflow>;

/// The credit of one admitted message: returned (`consumed`) when this
/// goes, unless it was moved from.  Travels inside the mailbox element
/// that carries the message to its target.
class actor_credit {
public:
  actor_credit() = default;
  actor_credit(actor_inflow_ptr flow, uint64_t bytes)
      : flow_(std::move(flow)), bytes_(bytes) {}
  actor_credit(actor_credit&& other) noexcept
      : flow_(std::move(other.flow_)), bytes_(other.bytes_) {}
  actor_credit& operator=(actor_credit&& other) noexcept {
    if (this != &other) {
      release();
      flow_ = std::move(other.flow_);
      bytes_ = other.bytes_;
    }
    return *this;
  }
  actor_credit(const actor_credit&) = delete;
  actor_credit& operator=(const actor_credit&) = delete;
  ~actor_credit() {
    release();
  }

  /// Returns the credit now (idempotent).
  void release() {
    if (auto f = std::move(flow_))
      f->consumed(bytes_);
  }

private:
  actor_inflow_ptr flow_;
  uint64_t bytes_ = 0;
};

} // namespace rdmactor
