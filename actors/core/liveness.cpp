// The liveness of one peer: keepalive and Goodbye.

#include "actors/core/liveness.hpp"

#include <algorithm>

namespace rdmactor {

liveness::step liveness::tick(time_point now) noexcept {
  step s;
  if (!keepalive_on() || said_goodbye_)
    return s;
  // A frame since our Ping answers it as well as the Pong would.
  if (awaiting_pong_ && last_heard_ >= ping_sent_)
    awaiting_pong_ = false;
  if (awaiting_pong_) {
    if (now >= ping_sent_ + period_) {
      s.what = verdict::dead;
      return s;
    }
    s.next = ping_sent_ + period_;
    return s;
  }
  if (now < last_heard_ + silence_) {
    s.next = last_heard_ + silence_;
    return s;
  }
  s.what = verdict::ping;
  s.next = now + period_;
  return s;
}

bool liveness::said_goodbye(const std::string& reason) {
  if (said_goodbye_)
    return false;
  said_goodbye_ = true;
  reason_ = sanitize(reason);
  return true;
}

std::string liveness::sanitize(const std::string& in) {
  std::string out;
  out.reserve(std::min(in.size(), max_reason));
  for (auto c : in) {
    if (out.size() == max_reason)
      break;
    out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  return out;
}

} // namespace rdmactor
