// The agent's protocol core: extensions negotiated in Hello (immediate
// data, memory-region tags) and the operations waiting for the peer's
// Hello to learn whether it offers one.

#include "actors/agent_core.hpp"

#include <algorithm>

#include "common/logging.hpp"

namespace rdmactor {

namespace pb = protocol;

uint32_t agent_core::our_extensions() const noexcept {
  uint32_t result = pb::EXT_MR_TAGS | pb::EXT_LEASES | pb::EXT_PIGGYBACK_ACKS;
  if (opts_.immediate_data)
    result |= pb::EXT_IMMEDIATE_DATA;
  if (offers_rendezvous())
    result |= pb::EXT_RENDEZVOUS;
  if (opts_.remote_actors)
    result |= pb::EXT_REMOTE_ACTORS;
  if (opts_.remote_actors && opts_.actor_flow)
    result |= pb::EXT_ACTOR_FLOW;
  if (offers_actor_rendezvous())
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

// -- leases -------------------------------------------------------------------

/// Revokes the leases that ended at or before `now`: drops the entry and
/// with it the lease's own registration (the peer's rkey stops working)
/// and our reference to the memory.  Returns the earliest lease end left.
agent_core::time_point agent_core::expire_leases(time_point now) {
  return held_.expire(now, [this](const mr_token& token, const owned_mr& x) {
    ++counters_.leases_expired;
    log().debug("agent {}: the lease of {} bytes at {:#x} ended; revoked",
                link_.peer, x.mr.size(), token.addr);
  });
}

void agent_core::on_renew_lease(uint64_t id, const pb::RenewLease& req) {
  auto token = pb::token_of(req.token());
  auto grant = held_.renew(token, req.lease_ms(), now_);
  if (!grant) {
    // Also a renewal that crossed the lease's end: not a violation of its
    // own, but the holder learns that the lease is gone.
    send_unsolicited(pb::make_renew_lease_response(
        id, pb::UNKNOWN_TOKEN,
        "no lease on this token here (it ended, was released, or was lent "
        "without one)"));
    count_noise("a RenewLease for a token without a lease");
    return;
  }
  accepted();
  send_unsolicited(pb::make_renew_lease_response(id, pb::OK, {}, *grant));
}

void agent_core::renew_lease(
    const mr_token& token, uint32_t lease_ms, time_point now,
    std::function<void(caf::expected<uint32_t>)> done) {
  auto id = new_request_id();
  send_request(
      pb::make_renew_lease(id, pb::make_token(token), lease_ms), local_mr{},
      [done = std::move(done)](const pb::Response* res, const caf::error& err) {
        if (err) {
          done(err);
          return;
        }
        if (res->body_case() == pb::Response::kRenewLease
            && pb::status_of(*res) == pb::UNKNOWN_TOKEN) {
          done(make_error(errc::lease_expired,
                          "the owner no longer holds a lease on this region "
                          "(it ended before the renewal arrived); ask for "
                          "the region again"));
          return;
        }
        if (auto e
            = check_response(*res, pb::Response::kRenewLease, "RenewLease")) {
          done(e);
          return;
        }
        done(res->renew_lease().lease_ms());
      },
      now);
}

} // namespace rdmactor
