#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace rdmactor {

/// Hands the heap's free memory back to the system (glibc's
/// `malloc_trim(0)`; nothing elsewhere), so that the resident size returns
/// near where it was before a peer made the node buffer its messages.
/// Called once per connection teardown (after its transport terminated),
/// any thread, and returns at once: the trim runs on the process's heap
/// trimmer thread ("rdm.heap.trim", started by the first call), paced by
/// `heap_trim_pacer` with `tuning::heap_trim_gap_ms` and
/// `tuning::heap_trim_duty`.  A lone teardown is trimmed at once; a burst
/// (a node dropping thousands of peers) costs one trim per gap instead of
/// one per connection, and the last teardown of the burst is trimmed
/// within one gap.  Where the thread cannot start, the caller trims.
/// Returns false where the platform has no trim.
bool trim_heap() noexcept;

/// The trims the heap trimmer has started since the process began.
uint64_t heap_trims_started() noexcept;

/// True while no request waits and no trim runs: every request made
/// before the call was served by a trim that began after it.
bool heap_trim_idle() noexcept;

/// When the heap trimmer trims: a request waits until a gap has passed
/// since the last trim began, and every request made before a trim begins
/// is served by it.  The gap is `min_gap`, or `duty` times the last trim's
/// duration when that is longer (a trim walks every free range of the
/// heap, so it grows with the memory a burst of teardowns freed): the
/// trimmer uses at most a `duty`-th of a core.  So a lone request is
/// served at once, a burst costs one trim per gap, and the memory freed
/// before the last request of a burst is trimmed one gap later at most.
/// Sans-IO: the trimmer thread passes the time in (and holds its lock
/// around every call).
class heap_trim_pacer {
public:
  using clock_type = std::chrono::steady_clock;

  heap_trim_pacer(clock_type::duration min_gap, uint32_t duty) noexcept
      : min_gap_(min_gap), duty_(duty) {
    // nop
  }

  /// A teardown asks for a trim.
  void ask() noexcept {
    pending_ = true;
  }

  /// Whether a request waits for a trim.
  bool pending() const noexcept {
    return pending_;
  }

  /// The earliest time the waiting request may be served.
  clock_type::time_point due() const noexcept {
    if (!started_)
      return clock_type::time_point::min();
    return last_ + std::max(min_gap_, last_took_ * duty_);
  }

  /// Starts the trim that serves every request made so far, at `now`.
  void start(clock_type::time_point now) noexcept {
    pending_ = false;
    started_ = true;
    last_ = now;
    last_took_ = {};
  }

  /// The trim that began at `start` ended at `now`.
  void finish(clock_type::time_point now) noexcept {
    last_took_ = now - last_;
  }

private:
  clock_type::duration min_gap_;
  uint32_t duty_;
  clock_type::time_point last_{};
  clock_type::duration last_took_{};
  bool started_ = false;
  bool pending_ = false;
};

} // namespace rdmactor
