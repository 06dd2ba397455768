#pragma once

// Internal to the agent: operations that wait for the peer's Hello to
// learn whether it offers an extension.  Not installed.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <caf/error.hpp>

#include "common/ring_deque.hpp"

namespace rdmactor {

/// Operations waiting for the peer's Hello (`agent_core::when_offered`):
/// each learns whether the peer offers its extension once the Hello
/// arrives, or fails at its deadline or when the connection ends.  Holds
/// the one wording of "not offered".  CAF-free, clock-free,
/// single-threaded.
class hello_waiters {
public:
  using clock_type = std::chrono::steady_clock;
  using time_point = clock_type::time_point;
  /// Called once: no error when the peer offers the extension, else why
  /// not (`not_negotiated`, `request_timeout`, or the connection's end).
  using fn_type = std::function<void(const caf::error&)>;

  /// Whether `extensions` (Hello.extensions) include `extension`: no
  /// error, or `not_negotiated` naming `what` and `peer`.
  static caf::error offered(uint32_t extensions, uint32_t extension,
                            const char* what, const std::string& peer);

  /// Waits for the Hello on behalf of `what` (a static string) until
  /// `deadline` (later than every earlier waiter's: deadlines come in
  /// order).
  void add(uint32_t extension, const char* what, time_point deadline,
           fn_type fn);

  /// The Hello arrived with `extensions`: runs every waiter, oldest first
  /// (see `offered`); one that calls `fail_all` answers the rest.
  void run(uint32_t extensions, const std::string& peer);

  /// Fails every waiter whose deadline is at or before `now` with
  /// `request_timeout` (naming the peer and `timeout_ms`).
  void expire(time_point now, const std::string& peer, uint32_t timeout_ms);

  /// Fails every waiter with `err` (the connection ended).
  void fail_all(const caf::error& err);

  /// The earliest deadline, or `time_point::max()` when none waits.
  time_point next_deadline() const noexcept {
    return waiting_.empty() ? time_point::max() : waiting_.front().deadline;
  }

  size_t size() const noexcept {
    return waiting_.size();
  }

private:
  struct waiter {
    uint32_t extension;
    const char* what;
    time_point deadline;
    fn_type fn;
  };

  /// Oldest (earliest deadline) first.
  ring_deque<waiter> waiting_;
};

} // namespace rdmactor
