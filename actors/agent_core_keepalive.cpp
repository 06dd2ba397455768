// The agent's protocol core: graceful close (Goodbye) and keepalive
// (Ping/Pong), both offered in Hello.

#include "actors/agent_core.hpp"

#include <algorithm>

#include "common/logging.hpp"

namespace rdmactor {

namespace pb = protocol;

namespace {

/// How much of a peer's Goodbye reason we keep (it goes into a log line).
constexpr size_t max_goodbye_reason = 200;

/// Keeps the printable ASCII of `in`, at most `max_goodbye_reason` bytes:
/// the reason comes from the untrusted peer and ends up in a log line.
std::string sanitize(const std::string& in) {
  std::string out;
  out.reserve(std::min(in.size(), max_goodbye_reason));
  for (auto c : in) {
    if (out.size() == max_goodbye_reason)
      break;
    out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  return out;
}

} // namespace

// -- graceful close -----------------------------------------------------------

caf::expected<std::vector<uint8_t>>
agent_core::goodbye_frame(const std::string& reason) {
  if (!peer_offers_goodbye_)
    return make_error(errc::closed,
                      "the peer " + link_.peer + " does not take Goodbye");
  if (peer_said_goodbye_)
    return make_error(errc::closed,
                      "the peer " + link_.peer + " said Goodbye already");
  return encode(pb::make_goodbye(sanitize(reason)));
}

void agent_core::on_goodbye(const pb::Goodbye& bye) {
  if (closed_ || peer_said_goodbye_)
    return;
  peer_said_goodbye_ = true;
  goodbye_reason_ = sanitize(bye.reason());
}

// -- keepalive ----------------------------------------------------------------

bool agent_core::keepalive_active() const noexcept {
  return opts_.keepalive_ms != 0 && peer_offers_keepalive_ && !closed_;
}

agent_core::keepalive_step agent_core::keepalive(time_point now) {
  now_ = now;
  keepalive_step step;
  if (!keepalive_active() || peer_said_goodbye_)
    return step;
  auto period = std::chrono::milliseconds{opts_.keepalive_ms};
  // A frame since our Ping answers it as well as the Pong would.
  if (awaiting_pong_ && last_heard_ >= ping_sent_)
    awaiting_pong_ = false;
  if (awaiting_pong_) {
    if (now >= ping_sent_ + period) {
      step.dead = make_error(
          errc::peer_gone,
          "the peer " + link_.peer + " sent nothing for "
              + std::to_string(
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      now - last_heard_)
                      .count())
              + " ms and did not answer a keepalive Ping within "
              + std::to_string(opts_.keepalive_ms)
              + " ms: it is frozen or gone; raise rdmactor.keepalive-ms if "
                "it is just slow");
      return step;
    }
    step.next = ping_sent_ + period;
    return step;
  }
  if (now < last_heard_ + period) {
    step.next = last_heard_ + period;
    return step;
  }
  // Silent for keepalive-ms: ask its agent (the NIC of a frozen process
  // still acknowledges at the transport level, the agent does not).
  ping_id_ = new_request_id();
  ping_sent_ = now;
  awaiting_pong_ = true;
  ++counters_.keepalive_pings;
  send_unsolicited(pb::make_ping(ping_id_));
  step.next = now + period;
  return step;
}

/// A Pong answers our outstanding Ping (any frame already counted as a
/// sign of life); one we did not ask for is noise.
void agent_core::on_pong(const pb::Response& res) {
  if (ping_id_ != 0 && res.request_id() == ping_id_) {
    ping_id_ = 0;
    return;
  }
  ++counters_.protocol_errors;
  count_noise("a Pong nobody asked for");
}

} // namespace rdmactor
