#pragma once

// Internal to the agent: whether the peer is alive (keepalive) and whether
// it closed on purpose (Goodbye).  Not installed.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "actors/core/node_liveness.hpp"

namespace rdmactor {

/// The liveness of one peer: keepalive (a Ping after `silence` without a
/// frame, at most `keepalive-ms`; a peer silent for `keepalive-ms` after
/// the Ping is dead or frozen) and graceful close (the peer's Goodbye and
/// its reason), both offered in Hello.  Any frame from the peer is a sign
/// of life and postpones the Ping, so of two ends that both run keepalive
/// the one with the shorter silence pings and the other only answers
/// (see `staggered`).  A connection that joined the `node_liveness` of its
/// peer node (`join`) counts every frame from that node, on any of the
/// node's connections to it, and waits for a Ping another of them sent
/// (dead when it stays unanswered for a period), so one connection per
/// peer node pings.  CAF-free and clock-free: the caller passes the time
/// and sends the Ping; single-threaded (the shared part is thread-safe).
class liveness {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// How much of a peer's Goodbye reason is kept (it goes into a log line).
  static constexpr size_t max_reason = 200;

  /// Pings after `silence` without a frame (0 or more than `period`:
  /// `period`); a peer silent for `period` after the Ping is dead (0:
  /// keepalive off on our side).
  explicit liveness(std::chrono::milliseconds period,
                    std::chrono::milliseconds silence = {})
      : period_(period),
        silence_(silence.count() <= 0 || silence > period ? period : silence) {}

  /// A silence in [3/4 `period`, `period`] chosen by `random`: each end
  /// of a connection picks its own, so that one of them pings and the
  /// other only answers (its Ping comes first, and any frame postpones
  /// the other's), instead of both pinging at once; a dead peer is still
  /// found within 2 x `period` of its last frame.
  static std::chrono::milliseconds staggered(std::chrono::milliseconds period,
                                             uint64_t random) noexcept {
    auto span = static_cast<uint64_t>(period.count() / 4);
    return period
           - std::chrono::milliseconds{
               static_cast<int64_t>(random % (span + 1))};
  }

  // -- what the peer's Hello offered -----------------------------------------

  /// The peer's Hello arrived: whether it takes Goodbye and answers Ping.
  void offered(bool goodbye, bool keepalive) noexcept {
    offers_goodbye_ = goodbye;
    offers_keepalive_ = keepalive;
  }

  bool peer_offers_goodbye() const noexcept {
    return offers_goodbye_;
  }

  /// Keepalive runs: the period is not 0 and the peer's Hello offered it.
  bool keepalive_on() const noexcept {
    return period_.count() != 0 && offers_keepalive_;
  }

  std::chrono::milliseconds period() const noexcept {
    return period_;
  }

  /// How long the peer may be silent before we ping it.
  std::chrono::milliseconds silence() const noexcept {
    return silence_;
  }

  // -- keepalive -------------------------------------------------------------

  /// From now on, shares liveness with the other connections to the same
  /// peer node through `group` (what this connection heard goes with it).
  void join(node_liveness_ptr group) noexcept {
    group->heard(last_heard_);
    group_ = std::move(group);
  }

  /// What this connection shares with the others to its peer node (one
  /// of its own until `join`).
  const node_liveness_ptr& group() const noexcept {
    return group_;
  }

  /// A frame (any) arrived from the peer at `now`.
  void heard(time_point now) noexcept {
    last_heard_ = now;
    group_->heard(now);
  }

  /// When the peer node was last heard from, here or on another connection
  /// of its group.
  time_point last_heard() const noexcept {
    return std::max(last_heard_, group_->last_heard());
  }

  /// What `tick` found.
  enum class verdict : uint8_t {
    /// Nothing to do before `next`.
    wait,
    /// Silent for a period: send a Ping now and call `pinged`.
    ping,
    /// Silent for a period after our Ping: the peer is dead or frozen.
    dead,
  };

  struct step {
    verdict what = verdict::wait;
    /// When to tick again (`time_point::max()`: keepalive is off); for
    /// `ping`, a period after `now`.
    time_point next = time_point::max();
  };

  /// Runs the keepalive at `now` (earlier than the last `next` is
  /// harmless).  Off (`keepalive_on` false, or the peer said Goodbye):
  /// always `wait` until `time_point::max()`.
  step tick(time_point now) noexcept;

  /// The Ping `tick` asked for went out with id `id` at `now`.
  void pinged(uint64_t id, time_point now) noexcept {
    ping_id_ = id;
    ping_sent_ = now;
    awaiting_pong_ = true;
    group_->pinged(now);
  }

  /// The connection closes: a Ping of ours still unanswered is no sign of
  /// a silent peer node for the others of the group (unless `tick` found
  /// the node dead with it).
  void closing() noexcept {
    if (awaiting_pong_ && !dead_)
      group_->withdraw_ping(ping_sent_);
    awaiting_pong_ = false;
  }

  /// Whether a Pong with `id` answers our Ping (then it is answered; one
  /// nobody asked for, or a second one, is noise).
  bool take_pong(uint64_t id) noexcept {
    if (ping_id_ == 0 || id != ping_id_)
      return false;
    ping_id_ = 0;
    return true;
  }

  // -- graceful close --------------------------------------------------------

  /// The peer's Goodbye with `reason` (kept printable and bounded); only
  /// the first counts.  Returns whether it was the first.
  bool said_goodbye(const std::string& reason);

  /// The peer sent Goodbye: it closed the connection on purpose.
  bool peer_said_goodbye() const noexcept {
    return said_goodbye_;
  }

  /// The reason its Goodbye gave (empty before one).
  const std::string& goodbye_reason() const noexcept {
    return reason_;
  }

  /// The printable ASCII of `in` ('?' for the rest), at most `max_reason`
  /// bytes: a reason from the untrusted peer, or ours, for a log line.
  static std::string sanitize(const std::string& in);

private:
  std::chrono::milliseconds period_;
  std::chrono::milliseconds silence_;
  bool offers_goodbye_ = false;
  bool offers_keepalive_ = false;
  bool said_goodbye_ = false;
  std::string reason_;
  time_point last_heard_{};
  /// Our last Ping: its id (0: none, or answered by its Pong) and when it
  /// went out; `awaiting_pong_` while no frame arrived since.
  uint64_t ping_id_ = 0;
  time_point ping_sent_{};
  bool awaiting_pong_ = false;
  /// `tick` found the peer dead.
  bool dead_ = false;
  node_liveness_ptr group_ = std::make_shared<node_liveness>();
};

} // namespace rdmactor
