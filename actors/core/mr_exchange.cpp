// The memory-region requests of one connection, both ways (actors/
// mr_exchange.hpp): AllocMR, ReleaseMR, SendMR LOCAL and REMOTE,
// RenewLease, and the leases of the regions held for the peer.

#include "actors/core/mr_exchange.hpp"

#include "common/logging.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor {

namespace pb = protocol;

namespace {

/// Access rights of memory allocated on behalf of the peer (AllocMR): the
/// peer may write, read and run atomics on it (the memory pool drops
/// remote_atomic on a device without atomics).  Atomics touch only what
/// writes may touch already.  These regions come from arenas of their own
/// (`memory_pool::owner::peers`), never shared with user allocations.
constexpr uint32_t peer_access = transport::access::all;

} // namespace

mr_exchange::mr_exchange(core_port& core)
    : core_(core),
      held_(core.opts().peer_max_mrs, core.opts().peer_max_alloc_bytes) {}

// -- our requests -------------------------------------------------------------

void mr_exchange::alloc(uint64_t size, uint64_t align, time_point now,
                        std::function<void(caf::expected<mr_token>)> done) {
  alloc_leased(size, align, now,
               [done = std::move(done)](caf::expected<mr_token> x, uint32_t) {
                 done(std::move(x));
               });
}

void mr_exchange::alloc_leased(
    uint64_t size, uint64_t align, time_point now,
    std::function<void(caf::expected<mr_token>, uint32_t)> done) {
  auto id = core_.new_request_id();
  core_.send_request(
      pb::make_alloc_mr(id, size, align), local_mr{},
      [this, id, done = std::move(done)](const pb::Response* res,
                                         const caf::error& err) {
        if (err) {
          if (code_of(err) == errc::request_timeout)
            core_.remember_late_alloc(id);
          done(err, 0);
          return;
        }
        if (auto e = check_response(*res, pb::Response::kAllocMr, "AllocMR")) {
          done(e, 0);
          return;
        }
        done(pb::token_of(res->alloc_mr().token()), res->alloc_mr().lease_ms());
      },
      now);
}

void mr_exchange::lend(local_mr mr, time_point now,
                       std::function<void(caf::expected<mr_token>)> done,
                       uint64_t tag, uint32_t lease_ms) {
  if (!mr.valid()) {
    done(make_error(errc::invalid_argument, "empty local_mr"));
    return;
  }
  if (tag == 0 && lease_ms == 0) {
    lend_now(std::move(mr), 0, 0, now, std::move(done));
    return;
  }
  uint32_t needs = (tag != 0 ? uint32_t{pb::EXT_MR_TAGS} : 0u)
                   | (lease_ms != 0 ? uint32_t{pb::EXT_LEASES} : 0u);
  core_.when_offered(
      needs, lease_ms != 0 ? "send_mr with a lease" : "send_mr with a tag", now,
      [this, mr, tag, lease_ms, done](const caf::error& err) mutable {
        if (err)
          done(err);
        else
          lend_now(std::move(mr), tag, lease_ms, core_.now(), std::move(done));
      });
}

/// SendMR LOCAL of `mr` with `tag` (the peer takes tags, or tag is 0) at
/// `now`: when the user asked, or when the peer's Hello said it takes it.
void mr_exchange::lend_now(local_mr mr, uint64_t tag, uint32_t lease_ms,
                           time_point now,
                           std::function<void(caf::expected<mr_token>)> done) {
  auto held = held_.hold(std::move(mr), false, lease_ms, now, *core_.pool());
  if (!held) {
    done(std::move(held.error()));
    return;
  }
  if (lease_ms != 0)
    core_.out().schedule_sweep();
  auto token = *held;
  auto id = core_.new_request_id();
  core_.send_request(
      pb::make_send_mr(id, pb::SendMR::LOCAL, pb::make_token(token), tag,
                       lease_ms),
      local_mr{},
      [this, token, done = std::move(done)](const pb::Response* res,
                                            const caf::error& err) {
        auto e
            = err ? err
                  : check_response(*res, pb::Response::kSendMr, "SendMR LOCAL");
        if (!e) {
          done(token);
          return;
        }
        // Not lent: unless the connection is going (then the
        // owner holds the memory until the queue pair is closed).
        if (!core_.closed())
          held_.release(token);
        done(e);
      },
      now);
}

void mr_exchange::give_back(const mr_token& token, time_point now,
                            std::function<void(const caf::error&)> done,
                            uint64_t tag) {
  if (tag == 0) {
    give_back_now(token, 0, now, std::move(done));
    return;
  }
  core_.when_offered(pb::EXT_MR_TAGS, "send_mr with a tag", now,
                     [this, token, tag, done](const caf::error& err) mutable {
                       if (err)
                         done(err);
                       else
                         give_back_now(token, tag, core_.now(),
                                       std::move(done));
                     });
}

/// SendMR REMOTE of `token` with `tag` (the peer takes tags, or tag is 0).
void mr_exchange::give_back_now(const mr_token& token, uint64_t tag,
                                time_point now,
                                std::function<void(const caf::error&)> done) {
  auto id = core_.new_request_id();
  core_.send_request(
      pb::make_send_mr(id, pb::SendMR::REMOTE, pb::make_token(token), tag),
      local_mr{},
      [done = std::move(done)](const pb::Response* res, const caf::error& err) {
        done(
            err ? err
                : check_response(*res, pb::Response::kSendMr, "SendMR REMOTE"));
      },
      now);
}

void mr_exchange::release(const mr_token& token, time_point now,
                          std::function<void(const caf::error&)> done) {
  auto id = core_.new_request_id();
  core_.send_request(
      pb::make_release_mr(id, pb::make_token(token)), local_mr{},
      [this, done = std::move(done)](const pb::Response* res,
                                     const caf::error& err) {
        caf::error e = err;
        if (!e)
          e = check_response(*res, pb::Response::kReleaseMr, "ReleaseMR");
        if (done) {
          done(e);
          return;
        }
        if (!e || code_of(e) == errc::peer_gone || code_of(e) == errc::closed
            || code_of(e) == errc::peer_closed)
          return;
        if (auto v = core_.may_log(spdlog::level::warn))
          log().warn("agent {}: ReleaseMR failed: {}{}", core_.link().peer,
                     render(e), suppressed_note(v.denied_before));
      },
      now);
}

// -- the peer's requests ------------------------------------------------------

void mr_exchange::on_alloc_mr(uint64_t id, const pb::AllocMR& req) {
  auto err = core_.pool()->check_layout(req.size(), req.align());
  if (!err && req.align() > memory_pool::arena_align_bytes)
    err = make_error(errc::invalid_layout,
                     "alignment " + std::to_string(req.align())
                         + " exceeds the "
                         + std::to_string(memory_pool::arena_align_bytes)
                         + " bytes a peer may ask for");
  if (err) {
    core_.reject(pb::make_alloc_mr_response(id, pb::to_status(code_of(err)),
                                            what_of(err)),
                 "AllocMR with an invalid layout");
    return;
  }
  if (!held_.quota_allows(req.size())) {
    core_.reject(pb::make_alloc_mr_response(
                     id, pb::QUOTA_EXCEEDED,
                     "you hold " + std::to_string(held_.peer_mrs())
                         + " regions of " + std::to_string(held_.peer_bytes())
                         + " bytes here; the limits are peer-max-mrs="
                         + std::to_string(core_.opts().peer_max_mrs)
                         + " and peer-max-alloc-" + "bytes="
                         + std::to_string(core_.opts().peer_max_alloc_bytes)),
                 "AllocMR over the peer's quota");
    return;
  }
  auto mr = core_.pool()->allocate(req.size(), req.align(), peer_access, true,
                                   memory_pool::owner::peers);
  if (!mr) {
    auto code = code_of(mr.error());
    core_.reject(pb::make_alloc_mr_response(id, pb::to_status(code),
                                            what_of(mr.error())),
                 "AllocMR");
    return;
  }
  uint32_t lease_ms = 0;
  if (core_.opts().peer_alloc_lease_ms != 0
      && core_.peer_offers(pb::EXT_LEASES))
    lease_ms = core_.opts().peer_alloc_lease_ms;
  auto token
      = held_.hold(std::move(*mr), true, lease_ms, core_.now(), *core_.pool());
  if (!token) {
    core_.reject(
        pb::make_alloc_mr_response(id, pb::to_status(code_of(token.error())),
                                   what_of(token.error())),
        "AllocMR (no registration for its lease)");
    return;
  }
  if (lease_ms != 0)
    core_.out().schedule_sweep();
  core_.accepted();
  auto res = pb::make_alloc_mr_response(id, pb::OK, {}, pb::make_token(*token));
  res.mutable_response()->mutable_alloc_mr()->set_lease_ms(lease_ms);
  core_.send_unsolicited(res);
}

void mr_exchange::on_release_mr(uint64_t id, const pb::ReleaseMR& req) {
  if (!held_.release(pb::token_of(req.token()))) {
    core_.reject(
        pb::make_release_mr_response(id, pb::UNKNOWN_TOKEN,
                                     "no memory region with this token is "
                                     "held for you"),
        "ReleaseMR of an unknown token");
    return;
  }
  core_.accepted();
  core_.send_unsolicited(pb::make_release_mr_response(id, pb::OK, {}));
}

void mr_exchange::on_send_mr(uint64_t id, const pb::SendMR& req) {
  auto token = pb::token_of(req.token());
  if (req.kind() == pb::SendMR::LOCAL) {
    // The peer lends us its memory.
    if (core_.out().queued_remote_mrs() >= core_.opts().peer_max_queued_mrs) {
      core_.reject(pb::make_send_mr_response(
                       id, pb::QUOTA_EXCEEDED,
                       "too many unclaimed memory regions queued here "
                       "(peer-max-queued-mrs="
                           + std::to_string(core_.opts().peer_max_queued_mrs)
                           + ")"),
                   "SendMR LOCAL over the queue limit");
      return;
    }
    core_.out().deliver_tagged_remote_mr(token, req.tag(), req.lease_ms());
    core_.accepted();
    core_.send_unsolicited(pb::make_send_mr_response(id, pb::OK, {}));
    return;
  }
  // The peer hands back memory we own.
  auto mr = held_.release(token);
  if (!mr) {
    core_.reject(
        pb::make_send_mr_response(id, pb::NOT_OWNED,
                                  "this node does not own a memory region "
                                  "with this token on your behalf"),
        "SendMR REMOTE of a token we do not own");
    return;
  }
  core_.out().deliver_tagged_local_mr(std::move(*mr), req.tag());
  core_.accepted();
  core_.send_unsolicited(pb::make_send_mr_response(id, pb::OK, {}));
}

// -- leases -------------------------------------------------------------------

/// Revokes the leases that ended at or before `now`: drops the entry and
/// with it the lease's own registration (the peer's rkey stops working)
/// and our reference to the memory.  Returns the earliest lease end left.
mr_exchange::time_point mr_exchange::expire_leases(time_point now) {
  return held_.expire(now, [this](const mr_token& token, const owned_mr& x) {
    ++core_.counters().leases_expired;
    log().debug("agent {}: the lease of {} bytes at {:#x} ended; revoked",
                core_.link().peer, x.mr.size(), token.addr);
  });
}

void mr_exchange::on_renew_lease(uint64_t id, const pb::RenewLease& req) {
  auto token = pb::token_of(req.token());
  auto grant = held_.renew(token, req.lease_ms(), core_.now());
  if (!grant) {
    // Also a renewal that crossed the lease's end: not a violation of its
    // own, but the holder learns that the lease is gone.
    core_.send_unsolicited(pb::make_renew_lease_response(
        id, pb::UNKNOWN_TOKEN,
        "no lease on this token here (it ended, was released, or was lent "
        "without one)"));
    core_.count_noise("a RenewLease for a token without a lease");
    return;
  }
  core_.accepted();
  core_.send_unsolicited(pb::make_renew_lease_response(id, pb::OK, {}, *grant));
}

void mr_exchange::renew_lease(
    const mr_token& token, uint32_t lease_ms, time_point now,
    std::function<void(caf::expected<uint32_t>)> done) {
  auto id = core_.new_request_id();
  core_.send_request(
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
