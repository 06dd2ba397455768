#pragma once

// A windowed event budget, free of CAF and of clocks: at most N events per
// window, counting the ones over.  Limits log lines a peer can trigger and
// the protocol noise it may send (actors/core/agent_core_responder.cpp).

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include <spdlog/common.h>

namespace rdmactor {

/// Admits at most `max_events` events per window of `window`; the events
/// over the budget are denied and counted until an admitted event (or
/// `take_denied`) reports them.  A window starts with the first event after
/// the previous one ended (fixed windows, not sliding).
///
/// Time never comes from a clock here: every call takes `now`, so a test
/// drives time.  A `now` earlier than the window's start (callers on other
/// threads) counts into the current window.  Thread-safe (a mutex), so one
/// instance may be shared process-wide (`shared_log_budget`).
class rate_limiter {
public:
  using clock_type = std::chrono::steady_clock;
  using time_point = clock_type::time_point;

  /// The answer for one event.
  struct verdict {
    /// Whether the event is within the budget (write the line, accept the
    /// frame).
    bool admitted = false;
    /// Admitted only: events denied since the last admitted one (for a
    /// "N similar lines suppressed" note).
    uint64_t denied_before = 0;

    explicit operator bool() const noexcept {
      return admitted;
    }
  };

  /// `max_events` = 0 denies every event.
  rate_limiter(uint64_t max_events, std::chrono::milliseconds window);

  rate_limiter(const rate_limiter&) = delete;
  rate_limiter& operator=(const rate_limiter&) = delete;

  /// Counts one event at `now` and says whether it is within the budget.
  verdict take(time_point now);

  /// Counts `n` events as denied without asking (e.g. lines another budget
  /// admitted but this one's owner could not write).
  void add_denied(uint64_t n);

  /// Returns the events denied since the last admitted one and forgets
  /// them (for a summary when the budget's owner goes).
  uint64_t take_denied();

  /// Events admitted in the current window.
  uint64_t used() const;

  /// Sets new limits and starts afresh (no window, nothing denied).
  void reset(uint64_t max_events, std::chrono::milliseconds window);

private:
  mutable std::mutex mtx_;
  uint64_t max_events_;
  std::chrono::milliseconds window_;
  bool started_ = false;
  time_point window_start_{};
  uint64_t used_ = 0;
  uint64_t denied_ = 0;
};

/// Returns the process-wide budget named `name` (created on first use with
/// `tuning::shared_log_lines` per `tuning::shared_log_window_ms`): log lines
/// about all peers together, on top of each peer's own budget.  Thread-safe;
/// the reference stays valid for the life of the process.
rate_limiter& shared_log_budget(const std::string& name);

/// Returns " (N similar lines suppressed)" for `n` > 0, else "": appended
/// to the line an admitted verdict lets through.
std::string suppressed_note(uint64_t n);

/// Writes `line` at `level` when the shared budget `budget` admits it,
/// with a "N similar lines suppressed" note when lines were held back
/// before; returns whether it was written.  A level the log filters out
/// spends no budget.  For lines a peer can trigger at will, once per
/// connection or per frame (connections opened, dropped and failed,
/// handshakes).  Any thread.
bool log_within(const std::string& budget, spdlog::level::level_enum level,
                const std::string& line);

/// `log_within` at warning level.
bool warn_within(const std::string& budget, const std::string& line);

} // namespace rdmactor
