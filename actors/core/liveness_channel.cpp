// Keepalive and graceful close of one connection
// (actors/core/liveness_channel.hpp).

#include "actors/core/liveness_channel.hpp"

#include "common/logging.hpp"

namespace rdmactor {

namespace pb = protocol;

liveness_channel::liveness_channel(core_port& core, uint64_t random)
    : core_(core),
      live_(std::chrono::milliseconds{core.opts().keepalive_ms},
            liveness::staggered(
                std::chrono::milliseconds{core.opts().keepalive_ms}, random)) {}

void liveness_channel::offered(bool goodbye, bool keepalive,
                               uint64_t peer_node) {
  live_.offered(goodbye, keepalive);
  // Once: a second Hello (noise) does not move the connection.
  if (joined_ || node_ == 0 || peer_node == 0 || !live_.keepalive_on())
    return;
  joined_ = true;
  live_.join(node_liveness_registry::instance().join(
      node_, peer_node, node_liveness_registry::host_of(core_.link().peer)));
}

// -- graceful close -----------------------------------------------------------

caf::expected<std::vector<uint8_t>>
liveness_channel::goodbye_frame(const std::string& reason) {
  const auto& peer = core_.link().peer;
  if (!live_.peer_offers_goodbye())
    return make_error(errc::closed,
                      "the peer " + peer + " does not take Goodbye");
  if (live_.peer_said_goodbye())
    return make_error(errc::closed,
                      "the peer " + peer + " said Goodbye already");
  return core_.encode(pb::make_goodbye(liveness::sanitize(reason)));
}

void liveness_channel::on_goodbye(const pb::Goodbye& bye) {
  if (!core_.closed())
    live_.said_goodbye(bye.reason());
}

// -- keepalive ----------------------------------------------------------------

bool liveness_channel::keepalive_active() const noexcept {
  return live_.keepalive_on() && !core_.closed();
}

liveness_channel::step liveness_channel::keepalive(time_point now) {
  core_.set_now(now);
  step result;
  if (core_.closed())
    return result;
  auto s = live_.tick(now);
  switch (s.what) {
    case liveness::verdict::wait:
      break;
    case liveness::verdict::dead:
      result.dead = make_error(
          errc::peer_gone,
          "the peer " + core_.link().peer + " sent nothing for "
              + std::to_string(
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      now - live_.last_heard())
                      .count())
              + " ms and did not answer a keepalive Ping within "
              + std::to_string(core_.opts().keepalive_ms)
              + " ms: it is frozen or gone; raise rdmactor.keepalive-ms if "
                "it is just slow");
      break;
    case liveness::verdict::ping: {
      // Silent for keepalive-ms: ask its agent (the NIC of a frozen process
      // still acknowledges at the transport level, the agent does not).
      auto id = core_.new_request_id();
      live_.pinged(id, now);
      ++core_.counters().keepalive_pings;
      core_.send_upkeep(pb::make_ping(id));
      break;
    }
  }
  result.next = s.next;
  return result;
}

/// Answered even when our own keepalive is off: cheap, and upkeep (it
/// starts no poll of the link).
void liveness_channel::on_ping(uint64_t id) {
  core_.accepted();
  core_.out().upkeep_frame();
  core_.send_upkeep(pb::make_pong(id));
}

/// A Pong answers our outstanding Ping (any frame already counted as a
/// sign of life); one we did not ask for is noise.
void liveness_channel::on_pong(const pb::Response& res) {
  if (live_.take_pong(res.request_id())) {
    core_.out().upkeep_frame();
    return;
  }
  ++core_.counters().protocol_errors;
  core_.count_noise("a Pong nobody asked for");
}

} // namespace rdmactor
