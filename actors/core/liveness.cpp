// The liveness of one peer: keepalive and Goodbye.

#include "actors/core/liveness.hpp"

#include <algorithm>

namespace rdmactor {

liveness::step liveness::tick(time_point now) noexcept {
  step s;
  if (!keepalive_on() || said_goodbye_)
    return s;
  // A frame since our Ping answers it as well as the Pong would, on this
  // connection or another one to the peer node.
  if (awaiting_pong_
      && (last_heard_ >= ping_sent_ || group_->heard_since(ping_sent_)))
    awaiting_pong_ = false;
  if (awaiting_pong_) {
    if (now >= ping_sent_ + period_) {
      s.what = verdict::dead;
      dead_ = true;
      return s;
    }
    s.next = ping_sent_ + period_;
    return s;
  }
  // Another connection pinged the peer node: its answer is ours.
  if (auto ping = group_->unanswered_ping()) {
    if (now >= *ping + period_) {
      s.what = verdict::dead;
      dead_ = true;
      return s;
    }
    s.next = *ping + period_;
    return s;
  }
  auto heard = last_heard();
  if (now < heard + silence_) {
    s.next = heard + silence_;
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
