#pragma once

// Internal to the agent: how much an untrusted peer may get wrong before
// its connection ends, and how much of the log it may fill.  Not installed.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <caf/error.hpp>

#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "rdmactor/options.hpp"

namespace rdmactor {

/// The budgets of one peer: protocol noise per window (peer-max-noise,
/// peer-noise-window-ms), violations in a row (peer-max-violations) and the
/// log lines its frames may trigger (peer-max-log-lines per
/// peer-log-window-ms, on top of the budget all agents share).  Decides;
/// the caller acts (ends the connection with the `ending` it gets).
/// CAF-free apart from the error type, clock-free, single-threaded.
class peer_guard {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// Why the connection must end: `reason` for the peer's operations and
  /// the user, `why` for the log line.
  struct ending {
    caf::error reason;
    std::string why;
  };

  /// Takes the limits from `opts` (the peer-max-* options).
  explicit peer_guard(const options& opts);

  /// Counts one piece of protocol noise (`what`: a refused request, a
  /// malformed frame, an unexpected response); an ending once the peer
  /// sent more than peer-max-noise within peer-noise-window-ms, however
  /// many valid requests it mixes in.
  std::optional<ending> noise(const char* what, time_point now);

  /// Counts one refusal or malformed frame: noise, and a violation in a
  /// row; an ending after peer-max-violations in a row (or too much noise).
  std::optional<ending> violation(time_point now);

  /// A request of the peer was served within its limits: the violations
  /// in a row start over.
  void accepted() noexcept {
    violations_ = 0;
  }

  /// Whether a line of `level` the peer's frames triggered may be written
  /// now: within the peer's budget and the budget all agents share
  /// (`shared_log_budget("agent")`).  An admitted verdict carries the
  /// count of lines held back since the last one written.  A level the
  /// log filters spends no budget.
  rate_limiter::verdict may_log(spdlog::level::level_enum level,
                                time_point now);

  /// The lines the peer's budget held back and no later line reported;
  /// forgets them.
  uint64_t take_denied_lines() {
    return log_budget_.take_denied();
  }

private:
  uint32_t max_noise_;
  uint32_t noise_window_ms_;
  uint32_t max_violations_;
  rate_limiter noise_;
  rate_limiter log_budget_;
  uint32_t violations_ = 0;
};

} // namespace rdmactor
