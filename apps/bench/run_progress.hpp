#pragma once

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include <caf/error.hpp>

#include "apps/bench/run_channel.hpp"
#include "apps/bench/run_spec.hpp"

namespace rdmactor::bench {

/// The bookkeeping every driver shares: operations issued and completed,
/// warmup, latency samples, and the one outcome it hands to its channel.
///
/// Owned by a driver actor's state and used only by that actor.  `fail`
/// and `finish_if_done` return true when they ended the run; the driver
/// then quits.
class run_progress {
public:
  using clock_type = std::chrono::steady_clock;

  run_progress() = default;

  run_progress(const run_spec& spec, run_channel_ptr chan)
      : spec_(spec), chan_(std::move(chan)), total_(spec.warmup + spec.iters) {
    if (spec.mode == bench_mode::lat)
      samples_.reserve(spec.iters);
  }

  /// Starts the clock of the measured part (again when the warmup ends).
  void start_clock() {
    t_start_ = clock_type::now();
  }

  const run_spec& spec() const noexcept {
    return spec_;
  }

  bool done() const noexcept {
    return done_;
  }

  uint64_t completed() const noexcept {
    return completed_;
  }

  /// True while operations remain to be issued.
  bool more_to_issue() const noexcept {
    return issued_ < total_;
  }

  /// True once the last operation completed.
  bool all_completed() const noexcept {
    return completed_ >= total_;
  }

  /// Counts one operation as issued.
  void issued() noexcept {
    ++issued_;
  }

  /// Operations issued so far.
  uint64_t issued_count() const noexcept {
    return issued_;
  }

  /// Operations issued whose answers (acks) the run must still wait for
  /// although they do not count as completed operations.
  uint64_t acks_pending = 0;

  /// Counts one completed operation; `sample_us` is its latency.  The
  /// clock of the measured part starts when the warmup ends.
  void complete(double sample_us) {
    ++completed_;
    chan_->tick();
    if (completed_ > spec_.warmup) {
      if (spec_.mode == bench_mode::lat)
        samples_.push_back(sample_us);
    } else if (completed_ == spec_.warmup) {
      t_start_ = clock_type::now();
    }
  }

  /// Ends the run with an error unless it ended already.
  bool fail(caf::error err) {
    if (done_)
      return false;
    done_ = true;
    chan_->fail(std::move(err));
    return true;
  }

  /// Ends the run with its outcome once every operation completed and no
  /// ack is pending.
  bool finish_if_done() {
    if (done_ || completed_ < total_ || acks_pending > 0)
      return false;
    done_ = true;
    run_outcome x;
    x.ops = spec_.iters;
    x.bytes = spec_.iters * spec_.size;
    x.elapsed_s
        = std::chrono::duration<double>(clock_type::now() - t_start_).count();
    x.lat_us = std::move(samples_);
    chan_->finish(std::move(x));
    return true;
  }

  /// Microseconds between `t0` and now.
  static double micros_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::micro>(clock_type::now() - t0)
        .count();
  }

private:
  run_spec spec_;
  run_channel_ptr chan_;
  uint64_t total_ = 0;
  uint64_t issued_ = 0;
  uint64_t completed_ = 0;
  clock_type::time_point t_start_;
  std::vector<double> samples_;
  bool done_ = false;
};

} // namespace rdmactor::bench
