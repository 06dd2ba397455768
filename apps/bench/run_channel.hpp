#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <caf/duration.hpp>
#include <caf/error.hpp>

namespace rdmactor::bench {

/// What a driver measured in one run.
struct run_outcome {
  /// One sample per measured operation in lat mode: half the round trip
  /// (send, raw) or the completion time (write, read), in microseconds.
  std::vector<double> lat_us;
  /// Measured operations and their payload bytes.
  uint64_t ops = 0;
  uint64_t bytes = 0;
  /// Wall time of the measured part.
  double elapsed_s = 0;
  /// CPU seconds of the processes that took part (run_context::cpu_pids)
  /// and their payload bytes, over the whole run, warm-up included
  /// (run_sizes fills them in).
  double cpu_s = 0;
  uint64_t all_bytes = 0;
  /// Set when the run failed; the other fields are then meaningless.
  caf::error err;
};

/// Hands a driver's outcome and progress to the thread that waits for it.
///
/// The driver (an actor) bumps `progress` per completed operation and calls
/// `finish` once; the waiting thread reads both.  Thread-safe.
class run_channel {
public:
  explicit run_channel(uint64_t total_ops) : total_(total_ops) {}

  /// Counts one completed operation (warmup included).
  void tick() noexcept {
    progress_.fetch_add(1, std::memory_order_relaxed);
  }

  uint64_t progress() const noexcept {
    return progress_.load(std::memory_order_relaxed);
  }

  uint64_t total() const noexcept {
    return total_;
  }

  /// Delivers the outcome; later calls are ignored.
  void finish(run_outcome x) {
    if (!finished_.exchange(true))
      promise_.set_value(std::move(x));
  }

  /// Delivers an error outcome; later calls are ignored.
  void fail(caf::error err) {
    run_outcome x;
    x.err = std::move(err);
    finish(std::move(x));
  }

  bool finished() const noexcept {
    return finished_.load();
  }

  /// Returns the future of the outcome (call once).
  std::future<run_outcome> outcome() {
    return promise_.get_future();
  }

private:
  uint64_t total_;
  std::atomic<uint64_t> progress_{0};
  std::atomic<bool> finished_{false};
  std::promise<run_outcome> promise_;
};

using run_channel_ptr = std::shared_ptr<run_channel>;

/// The timeout of the bench's requests on the measured path: none.  In CAF
/// 0.17 each request with a timeout goes through the actor clock's thread
/// (a condition-variable broadcast and a wake-up to add the timer, another
/// to drop it), on the critical path of a ping-pong, for rdmactor and CAF
/// io alike.  What bounds them instead: the run's deadline
/// (`wait_for_run`), rdmactor's own request timeout
/// (`rdmactor.request-timeout-ms`, connections), a transport that answers
/// every operation or fails it when the link goes down (raw), and the
/// caf-io driver's watchdog.
constexpr auto no_caf_timeout = caf::infinite;

/// One outcome of `lanes` that ran at once: their operations and bytes
/// over the longest measured time (conservative: a lane that finished
/// early counts as running until the last one did), their latency samples
/// together; the first error fails the whole.
run_outcome combine_lanes(std::vector<run_outcome> lanes);

/// Waits for the outcome of a run, printing a progress line to stderr once
/// the run takes longer than two seconds.  Gives up after `limit` with an
/// `errc::request_timeout` outcome.
run_outcome wait_for_run(run_channel& chan, const std::string& label,
                         std::chrono::milliseconds limit);

} // namespace rdmactor::bench
