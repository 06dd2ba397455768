// The budgets of one untrusted peer.

#include "actors/core/peer_guard.hpp"

#include "rdmactor/error.hpp"

namespace rdmactor {

peer_guard::peer_guard(const options& opts)
    : max_noise_(opts.peer_max_noise),
      noise_window_ms_(opts.peer_noise_window_ms),
      max_violations_(opts.peer_max_violations),
      noise_(opts.peer_max_noise,
             std::chrono::milliseconds{opts.peer_noise_window_ms}),
      log_budget_(opts.peer_max_log_lines,
                  std::chrono::milliseconds{opts.peer_log_window_ms}) {}

std::optional<peer_guard::ending> peer_guard::noise(const char* what,
                                                    time_point now) {
  if (noise_.take(now))
    return std::nullopt;
  return ending{
      make_error(errc::quota_exceeded,
                 "the peer sent more than " + std::to_string(max_noise_)
                     + " refused requests, malformed frames or unexpected "
                       "responses within "
                     + std::to_string(noise_window_ms_)
                     + " ms (peer-max-noise, peer-noise-window-ms)"),
      std::string{"more than "} + std::to_string(max_noise_)
          + " pieces of protocol noise within "
          + std::to_string(noise_window_ms_) + " ms, the last " + what};
}

std::optional<peer_guard::ending> peer_guard::violation(time_point now) {
  auto end = noise("a refused request or malformed frame", now);
  if (++violations_ < max_violations_ || end)
    return end;
  return ending{make_error(errc::quota_exceeded,
                           "the peer kept violating the protocol or its "
                           "limits (peer-max-violations)"),
                std::to_string(violations_)
                    + " refused requests or malformed frames in a row"};
}

rate_limiter::verdict peer_guard::may_log(spdlog::level::level_enum level,
                                          time_point now) {
  if (!log().should_log(level))
    return {}; // filtered anyway: spends no budget
  auto mine = log_budget_.take(now);
  if (!mine)
    return mine;
  auto& shared = shared_log_budget("agent");
  auto all = shared.take(now);
  if (!all) {
    // The lines this peer's budget held back are reported by the next line
    // the shared budget lets through.
    shared.add_denied(mine.denied_before);
    return all;
  }
  return {true, mine.denied_before + all.denied_before};
}

} // namespace rdmactor
