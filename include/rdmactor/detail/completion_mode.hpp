#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "rdmactor/options.hpp"

namespace rdmactor::transport {

/// How the transport actor learns that its completion queue has entries.
enum class completion_mode : uint8_t {
  /// Arm the CQ after every drain; the fabric's thread (soft: its event
  /// loop; verbs: the completion engine) wakes the actor with a message.
  /// Costs no CPU while waiting, a thread hand-off (and on verbs a system
  /// call to re-arm) per completion.
  event,
  /// Never arm: the actor reschedules itself to poll again after every
  /// drain.  One CAF worker per connection spins; for dedicated cores.
  busy,
  /// Poll while operations are outstanding and for `poll_budget_us` after
  /// the last completion, then arm and wait for an event.  The default.
  adaptive,
};

/// How a transport actor polls its CQ (from `rdmactor.completion-mode` and
/// `rdmactor.poll-budget-us`).
struct polling {
  completion_mode mode = completion_mode::adaptive;
  /// adaptive: how long to keep polling after the last completion while
  /// nothing is outstanding, in microseconds.
  uint32_t poll_budget_us = 1000;
};

/// What `requested` amounts to on a device: `adaptive` becomes `event`
/// where polling does not pay (`polling_pays` is false; both of our
/// fabrics say true);
/// `event` and `busy` are taken as they are.  Connections apply it; the
/// transport actor does what it is given.
template <class Device>
polling effective_polling(const Device& dev, polling requested) {
  if (requested.mode == completion_mode::adaptive && !dev.polling_pays())
    requested.mode = completion_mode::event;
  return requested;
}

/// Parses "event", "busy" or "adaptive".
inline std::optional<completion_mode>
parse_completion_mode(std::string_view s) {
  if (s == "event")
    return completion_mode::event;
  if (s == "busy")
    return completion_mode::busy;
  if (s == "adaptive")
    return completion_mode::adaptive;
  return std::nullopt;
}

/// The polling that `opts` asks for (`completion-mode`, `poll-budget-us`);
/// a mode `validate(opts)` would refuse reads as the default.
inline polling polling_of(const options& opts) {
  polling how;
  how.mode = parse_completion_mode(opts.completion_mode).value_or(how.mode);
  how.poll_budget_us = opts.poll_budget_us;
  return how;
}

/// The name `parse_completion_mode` accepts.
inline const char* to_string(completion_mode m) {
  switch (m) {
    case completion_mode::event:
      return "event";
    case completion_mode::busy:
      return "busy";
    case completion_mode::adaptive:
      return "adaptive";
  }
  return "adaptive";
}

} // namespace rdmactor::transport
