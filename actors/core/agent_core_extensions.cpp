// The agent's protocol core: extensions negotiated in Hello (immediate
// data, memory-region tags) and the operations waiting for the peer's
// Hello to learn whether it offers one.

#include "actors/core/agent_core.hpp"

#include <algorithm>

#include "common/logging.hpp"

namespace rdmactor {

namespace pb = protocol;

uint32_t agent_core::our_extensions() const noexcept {
  uint32_t result = pb::EXT_MR_TAGS | pb::EXT_LEASES | pb::EXT_PIGGYBACK_ACKS
                    | pb::EXT_PACKED_FRAMES;
  if (opts_.immediate_data)
    result |= pb::EXT_IMMEDIATE_DATA;
  if (offers_rendezvous())
    result |= pb::EXT_RENDEZVOUS;
  if (opts_.remote_actors)
    result |= pb::EXT_REMOTE_ACTORS;
  if (opts_.remote_actors && opts_.actor_flow)
    result |= pb::EXT_ACTOR_FLOW;
  if (actors_.offers_rendezvous())
    result |= pb::EXT_ACTOR_RENDEZVOUS;
  return result;
}

void agent_core::when_offered(uint32_t extension, const char* what,
                              time_point now,
                              std::function<void(const caf::error&)> fn) {
  now_ = now;
  if (closed_) {
    fn(peer_gone_error());
    return;
  }
  if (hello_seen_) {
    fn(hello_waiters::offered(peer_extensions_, extension, what, link_.peer));
    return;
  }
  if (requests_.size() + hello_waiters_.size() >= requests_.capacity()) {
    fn(make_error(errc::quota_exceeded,
                  std::string{what} + ": too many operations wait for the "
                      + "Hello of " + link_.peer
                      + " (peer-max-pending-requests)"));
    return;
  }
  hello_waiters_.add(extension, what, now + request_timeout(), std::move(fn));
  out_.schedule_sweep();
}

void agent_core::on_write_imm(uint32_t imm, uint64_t bytes, time_point now) {
  now_ = now;
  if (closed_)
    return;
  const char* why = nullptr;
  if (!opts_.immediate_data)
    why = "an RDMA write with immediate data, which this node did not offer "
          "(immediate-data=false)";
  else if (out_.queued_imms() >= opts_.peer_max_queued_imms)
    why = "an immediate value over peer-max-queued-imms (the application "
          "does not claim them with receive_imm)";
  if (why == nullptr) {
    out_.deliver_write_imm(imm, bytes);
    return;
  }
  ++counters_.protocol_errors;
  ++counters_.imms_dropped;
  if (auto v = may_log(spdlog::level::warn))
    log().warn("agent {}: dropped {}{}", link_.peer, why,
               suppressed_note(v.denied_before));
  count_noise(why);
}

} // namespace rdmactor
