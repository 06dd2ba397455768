#pragma once

#include <chrono>
#include <climits>

namespace rdmactor::transport::soft {

/// The clock of every soft-fabric deadline.
using clock_type = std::chrono::steady_clock;

/// A point in time on `clock_type`.
using time_point = clock_type::time_point;

/// Returns the `poll()` timeout in milliseconds until `t`: 0 when due,
/// rounded up so that a wake-up never comes early, at most INT_MAX.
inline int poll_timeout_ms(time_point t, time_point now) noexcept {
  if (t <= now)
    return 0;
  auto us
      = std::chrono::duration_cast<std::chrono::microseconds>(t - now).count();
  auto ms = (us + 999) / 1000;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

} // namespace rdmactor::transport::soft
