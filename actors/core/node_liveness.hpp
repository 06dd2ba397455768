#pragma once

// Internal to the agent: the keepalive state that the connections of one
// node to one peer node share.  Not installed.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

namespace rdmactor {

/// Whether a peer node is alive, as every connection of one local node to
/// it sees it: when it was last heard from (on any of them), when one of
/// them last pinged it, and which connection the keepalive timer woke to
/// ping.  A peer node is one process (its node's identity comes in Hello),
/// so a frame on any connection to it is a sign of life for all: of N idle
/// connections to one node, one pings per keepalive period instead of N.
///
/// Times are kept in whole milliseconds of `steady_clock` (rounded down):
/// a frame stores at most once per millisecond, so connections busy on
/// several workers do not fight over one cache line per frame; a frame in
/// the millisecond of a Ping counts as its answer (errs towards alive by
/// under a millisecond).  Thread-safe: agents write on their workers, the
/// keepalive timer reads on its thread.
class node_liveness {
public:
  using clock_type = std::chrono::steady_clock;
  using time_point = clock_type::time_point;
  using duration = clock_type::duration;

  /// A frame from the peer node arrived at `now` (never moves back).
  void heard(time_point now) noexcept;

  /// When the peer node was last heard from (rounded down to the ms; the
  /// clock's epoch before any frame).
  time_point last_heard() const noexcept {
    return from_ms(heard_ms_.load(std::memory_order_relaxed));
  }

  /// Whether a frame arrived in or after the millisecond of `t`.
  bool heard_since(time_point t) const noexcept {
    return heard_ms_.load(std::memory_order_relaxed) >= to_ms(t);
  }

  /// A connection pinged the peer node at `now`.
  void pinged(time_point now) noexcept {
    ping_ms_.store(to_ms(now), std::memory_order_relaxed);
  }

  /// The connection that pinged at `at` closed before the answer came:
  /// its Ping is no sign of a silent peer any more (unless another Ping
  /// went out since, which stays).
  void withdraw_ping(time_point at) noexcept;

  /// The last Ping that no frame answered yet (no frame in or after its
  /// millisecond), if any.
  std::optional<time_point> unanswered_ping() const noexcept;

  /// What the keepalive timer does with a connection's check due now.
  struct plan {
    /// Send the connection its check now (it pings, or finds the peer
    /// node dead); else look again at `at` without waking it.
    bool wake = false;
    time_point at{};
  };

  /// Decides the check of connection `who` (any stable identity), whose
  /// peer may be silent for `silence` and gets `period` to answer a Ping,
  /// at `now`: not while the peer node was heard from within `silence`;
  /// not while a Ping of another connection waits for its answer (until
  /// `period` after it: then every check wakes, to find the node dead);
  /// and of the checks that find the node silent, only the first wakes
  /// (it pings) and the others wait for a period or for the answer.
  /// Called by the keepalive timer's thread only.
  plan check(time_point now, duration silence, duration period,
             const void* who) noexcept;

private:
  static int64_t to_ms(time_point t) noexcept {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               t.time_since_epoch())
        .count();
  }

  static time_point from_ms(int64_t ms) noexcept {
    return time_point{std::chrono::milliseconds{ms}};
  }

  std::atomic<int64_t> heard_ms_{0};
  /// 0: no Ping (or it was withdrawn).
  std::atomic<int64_t> ping_ms_{0};
  /// The check the timer last woke to ping, and when (timer thread).
  std::atomic<int64_t> woken_ms_{0};
  std::atomic<const void*> woken_{nullptr};
};

using node_liveness_ptr = std::shared_ptr<node_liveness>;

/// The process's `node_liveness` objects, one per local node, peer node and
/// peer host: the connections of a node to a peer node that says it is
/// `peer` in its Hello from host `host` share one.  The host keeps a peer
/// from joining another host's group by naming its node (a peer can only
/// speak for a node at its own address).  Entries go with the last
/// connection that holds them.  Thread-safe.
class node_liveness_registry {
public:
  /// The process's registry.
  static node_liveness_registry& instance();

  /// The liveness that the connections of node `local` to node `peer` at
  /// `host` share (created for the first).
  node_liveness_ptr join(uint64_t local, uint64_t peer,
                         const std::string& host);

  /// Groups that connections still hold (for tests).
  size_t groups() const;

  /// The host of a peer's "host:port" name (the text before the last
  /// colon; the whole name when it has none).
  static std::string host_of(const std::string& peer);

private:
  using key = std::tuple<uint64_t, uint64_t, std::string>;

  mutable std::mutex mtx_;
  std::map<key, std::weak_ptr<node_liveness>> groups_;
  /// Sweep the expired entries once the map has grown past this.
  size_t sweep_at_ = 64;
};

} // namespace rdmactor
