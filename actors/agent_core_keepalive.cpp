// The agent's protocol core: graceful close (Goodbye) and keepalive
// (Ping/Pong), both offered in Hello.

#include "actors/agent_core.hpp"

#include "common/logging.hpp"

namespace rdmactor {

namespace pb = protocol;

// -- graceful close -----------------------------------------------------------

caf::expected<std::vector<uint8_t>>
agent_core::goodbye_frame(const std::string& reason) {
  if (!live_.peer_offers_goodbye())
    return make_error(errc::closed,
                      "the peer " + link_.peer + " does not take Goodbye");
  if (live_.peer_said_goodbye())
    return make_error(errc::closed,
                      "the peer " + link_.peer + " said Goodbye already");
  return encode(pb::make_goodbye(liveness::sanitize(reason)));
}

void agent_core::on_goodbye(const pb::Goodbye& bye) {
  if (!closed_)
    live_.said_goodbye(bye.reason());
}

// -- keepalive ----------------------------------------------------------------

bool agent_core::keepalive_active() const noexcept {
  return live_.keepalive_on() && !closed_;
}

agent_core::keepalive_step agent_core::keepalive(time_point now) {
  now_ = now;
  keepalive_step step;
  if (closed_)
    return step;
  auto s = live_.tick(now);
  switch (s.what) {
    case liveness::verdict::wait:
      break;
    case liveness::verdict::dead:
      step.dead = make_error(
          errc::peer_gone,
          "the peer " + link_.peer + " sent nothing for "
              + std::to_string(
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      now - live_.last_heard())
                      .count())
              + " ms and did not answer a keepalive Ping within "
              + std::to_string(opts_.keepalive_ms)
              + " ms: it is frozen or gone; raise rdmactor.keepalive-ms if "
                "it is just slow");
      break;
    case liveness::verdict::ping: {
      // Silent for keepalive-ms: ask its agent (the NIC of a frozen process
      // still acknowledges at the transport level, the agent does not).
      auto id = new_request_id();
      live_.pinged(id, now);
      ++counters_.keepalive_pings;
      send_unsolicited(pb::make_ping(id), true);
      break;
    }
  }
  step.next = s.next;
  return step;
}

/// A Pong answers our outstanding Ping (any frame already counted as a
/// sign of life); one we did not ask for is noise.
void agent_core::on_pong(const pb::Response& res) {
  if (live_.take_pong(res.request_id())) {
    out_.upkeep_frame();
    return;
  }
  ++counters_.protocol_errors;
  count_noise("a Pong nobody asked for");
}

} // namespace rdmactor
