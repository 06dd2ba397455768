#pragma once

// Internal to the agent: the one timer that drives every connection's
// keepalive in the process.  Not installed.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <caf/actor_control_block.hpp>

#include "actors/core/node_liveness.hpp"

namespace rdmactor {

/// Deadlines rounded up to a tick, each holding what is due then (oldest
/// first): adding and taking cost a lookup per tick, not per entry, and
/// entries due in the same tick come out together.  Clock-free,
/// single-threaded (the timer guards it).
template <class T>
class deadline_queue {
public:
  using clock_type = std::chrono::steady_clock;
  using time_point = clock_type::time_point;

  explicit deadline_queue(clock_type::duration tick) : tick_(tick) {}

  /// `at` rounded up to a multiple of `tick` since the clock's epoch.
  static time_point round_up(time_point at, clock_type::duration tick) {
    auto since = at.time_since_epoch();
    auto ticks = (since + tick - clock_type::duration{1}) / tick;
    return time_point{ticks * tick};
  }

  /// Adds `x`, due at `at` rounded up to the tick.  Returns whether it is
  /// now the earliest deadline (the waiting thread must look again).
  bool add(T x, time_point at) {
    auto due = round_up(at, tick_);
    bool earliest = by_due_.empty() || due < by_due_.begin()->first;
    by_due_[due].push_back(std::move(x));
    ++size_;
    return earliest;
  }

  /// The earliest deadline; `time_point::max()` when empty.
  time_point next() const noexcept {
    return by_due_.empty() ? time_point::max() : by_due_.begin()->first;
  }

  /// Moves every entry due at or before `now` to `out` (earliest first).
  void take_due(time_point now, std::vector<T>& out) {
    while (!by_due_.empty() && by_due_.begin()->first <= now) {
      auto& xs = by_due_.begin()->second;
      size_ -= xs.size();
      for (auto& x : xs)
        out.push_back(std::move(x));
      by_due_.erase(by_due_.begin());
    }
  }

  size_t size() const noexcept {
    return size_;
  }

private:
  clock_type::duration tick_;
  std::map<time_point, std::vector<T>> by_due_;
  size_t size_ = 0;
};

/// The process's keepalive timer: one thread, one `deadline_queue` of
/// agents (deadlines in ticks: `tick_for`), held weakly so that a connection
/// nobody holds goes away while it waits.  When an agent is due, the
/// `node_liveness` of its peer node decides (`node_liveness::check`):
/// while the node was heard from (on any connection of the group) or a
/// Ping of the group waits for its answer, the check is due again later
/// and the agent is not woken (its activation was the cost of a check
/// that found nothing to do); otherwise the agent gets
/// `transport::tick_atom` (its keepalive check, `on_keepalive`), and of
/// the connections to a silent node only the first due is woken to ping.
/// A timer per connection (a delayed message through its transport actor
/// and CAF's clock) cost three actor activations and a wake of the clock
/// thread per check; here an idle peer node costs one Ping per period,
/// whatever the number of connections to it, and the checks due in one
/// tick share one wake-up of the timer's thread.
class keepalive_timer {
public:
  using clock_type = std::chrono::steady_clock;
  using time_point = clock_type::time_point;

  /// The process's timer; its thread starts with the first `schedule`
  /// and ends at exit.
  static keepalive_timer& instance();

  keepalive_timer();
  keepalive_timer(const keepalive_timer&) = delete;
  keepalive_timer& operator=(const keepalive_timer&) = delete;

  /// Stops the thread (what waits is dropped).
  ~keepalive_timer();

  /// The tick a connection's deadlines are rounded up to, for a peer that
  /// may be silent for `silence` (tuning::keepalive_ticks_per_period).
  static clock_type::duration tick_for(clock_type::duration silence) noexcept;

  /// Sends `tick_atom` to `agent` at `at` (rounded up to `tick_for
  /// (silence)`) if it still lives then and, when `group` is set, its
  /// check says so (`group->check(now, silence, period, agent)`);
  /// otherwise at the time the check names.  Thread-safe.
  void schedule(caf::weak_actor_ptr agent, time_point at,
                node_liveness_ptr group = nullptr,
                clock_type::duration silence = {},
                clock_type::duration period = {});

  /// Agents waiting (for tests).
  size_t waiting() const;

private:
  struct entry {
    caf::weak_actor_ptr agent;
    node_liveness_ptr group;
    clock_type::duration silence;
    clock_type::duration period;
  };

  void run();

  mutable std::mutex mtx_;
  std::condition_variable cv_;
  deadline_queue<entry> queue_;
  bool stop_ = false;
  std::thread thread_;
};

} // namespace rdmactor
