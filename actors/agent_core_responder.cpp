// The agent's protocol core: the responder, which serves the untrusted
// peer's requests and matches its responses.  Every field from the wire is
// checked here.

#include "actors/agent_core.hpp"

#include <algorithm>
#include <cstring>

#include "common/logging.hpp"
#include "common/tuning.hpp"

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

// -- requests from the peer ---------------------------------------------------

/// Whether a line of `level` the peer's frames triggered may be written now
/// (peer_guard::may_log).
rate_limiter::verdict agent_core::may_log(spdlog::level::level_enum level) {
  return guard_.may_log(level, now_);
}

/// Disconnects the peer once, logging `why` (through the shared budget: a
/// peer can open connections to end).
void agent_core::end_connection(const caf::error& reason,
                                const std::string& why) {
  if (disconnected_ || closed_)
    return;
  disconnected_ = true;
  auto& shared = shared_log_budget("agent");
  if (auto v = shared.take(now_))
    log().error("agent {}: {}; disconnecting the peer{}", link_.peer, why,
                suppressed_note(v.denied_before));
  else
    shared.add_denied(1);
  out_.disconnect(reason);
}

/// Counts one piece of protocol noise (`what`); disconnects a peer over
/// its budget (peer_guard::noise).
void agent_core::count_noise(const char* what) {
  if (auto end = guard_.noise(what, now_); end && !closed_)
    end_connection(end->reason, end->why);
}

/// Counts one refusal or malformed frame; disconnects a peer that keeps
/// violating (peer_guard::violation).
void agent_core::count_violation() {
  if (auto end = guard_.violation(now_); end && !closed_)
    end_connection(end->reason, end->why);
}

void agent_core::reject(const pb::Message& res, const char* what) {
  ++counters_.rejected_requests;
  if (auto v = may_log(spdlog::level::warn))
    log().warn("agent {}: rejected {} from the peer{}", link_.peer, what,
               suppressed_note(v.denied_before));
  send_unsolicited(res);
  count_violation();
}

/// Marks a request from the peer as served within its limits.
void agent_core::accepted() {
  guard_.accepted();
}

void agent_core::on_alloc_mr(uint64_t id, const pb::AllocMR& req) {
  auto err = pool_->check_layout(req.size(), req.align());
  if (!err && req.align() > memory_pool::arena_align_bytes)
    err = make_error(errc::invalid_layout,
                     "alignment " + std::to_string(req.align())
                         + " exceeds the "
                         + std::to_string(memory_pool::arena_align_bytes)
                         + " bytes a peer may ask for");
  if (err) {
    reject(pb::make_alloc_mr_response(id, pb::to_status(code_of(err)),
                                      what_of(err)),
           "AllocMR with an invalid layout");
    return;
  }
  if (!held_.quota_allows(req.size())) {
    reject(pb::make_alloc_mr_response(
               id, pb::QUOTA_EXCEEDED,
               "you hold " + std::to_string(held_.peer_mrs()) + " regions of "
                   + std::to_string(held_.peer_bytes())
                   + " bytes here; the limits are peer-max-mrs="
                   + std::to_string(opts_.peer_max_mrs) + " and peer-max-alloc-"
                   + "bytes=" + std::to_string(opts_.peer_max_alloc_bytes)),
           "AllocMR over the peer's quota");
    return;
  }
  auto mr = pool_->allocate(req.size(), req.align(), peer_access, true,
                            memory_pool::owner::peers);
  if (!mr) {
    auto code = code_of(mr.error());
    reject(pb::make_alloc_mr_response(id, pb::to_status(code),
                                      what_of(mr.error())),
           "AllocMR");
    return;
  }
  uint32_t lease_ms = 0;
  if (opts_.peer_alloc_lease_ms != 0 && peer_offers(pb::EXT_LEASES))
    lease_ms = opts_.peer_alloc_lease_ms;
  auto token = held_.hold(std::move(*mr), true, lease_ms, now_, *pool_);
  if (!token) {
    reject(pb::make_alloc_mr_response(id, pb::to_status(code_of(token.error())),
                                      what_of(token.error())),
           "AllocMR (no registration for its lease)");
    return;
  }
  if (lease_ms != 0)
    out_.schedule_sweep();
  accepted();
  auto res = pb::make_alloc_mr_response(id, pb::OK, {}, pb::make_token(*token));
  res.mutable_response()->mutable_alloc_mr()->set_lease_ms(lease_ms);
  send_unsolicited(res);
}

void agent_core::on_release_mr(uint64_t id, const pb::ReleaseMR& req) {
  if (!held_.release(pb::token_of(req.token()))) {
    reject(pb::make_release_mr_response(id, pb::UNKNOWN_TOKEN,
                                        "no memory region with this token is "
                                        "held for you"),
           "ReleaseMR of an unknown token");
    return;
  }
  accepted();
  send_unsolicited(pb::make_release_mr_response(id, pb::OK, {}));
}

void agent_core::on_send_mr(uint64_t id, const pb::SendMR& req) {
  auto token = pb::token_of(req.token());
  if (req.kind() == pb::SendMR::LOCAL) {
    // The peer lends us its memory.
    if (out_.queued_remote_mrs() >= opts_.peer_max_queued_mrs) {
      reject(pb::make_send_mr_response(
                 id, pb::QUOTA_EXCEEDED,
                 "too many unclaimed memory regions queued here "
                 "(peer-max-queued-mrs="
                     + std::to_string(opts_.peer_max_queued_mrs) + ")"),
             "SendMR LOCAL over the queue limit");
      return;
    }
    out_.deliver_tagged_remote_mr(token, req.tag(), req.lease_ms());
    accepted();
    send_unsolicited(pb::make_send_mr_response(id, pb::OK, {}));
    return;
  }
  // The peer hands back memory we own.
  auto mr = held_.release(token);
  if (!mr) {
    reject(pb::make_send_mr_response(id, pb::NOT_OWNED,
                                     "this node does not own a memory region "
                                     "with this token on your behalf"),
           "SendMR REMOTE of a token we do not own");
    return;
  }
  out_.deliver_tagged_local_mr(std::move(*mr), req.tag());
  accepted();
  send_unsolicited(pb::make_send_mr_response(id, pb::OK, {}));
}

void agent_core::on_send_data(uint64_t id, const pb::SendData& req,
                              const local_mr& buf,
                              const pb::decode_result& frame) {
  if (req.has_imm() && !opts_.immediate_data) {
    reject(pb::make_send_data_response(
               id, pb::MALFORMED,
               "SendData with an immediate value, which this node did not "
               "offer in its Hello (immediate-data=false)"),
           "SendData with an immediate value we did not offer");
    return;
  }
  if (req.has_imm() && out_.queued_imms() >= opts_.peer_max_queued_imms) {
    reject(pb::make_send_data_response(
               id, pb::QUOTA_EXCEEDED,
               std::to_string(out_.queued_imms())
                   + " immediate values you sent are not claimed yet "
                     "(peer-max-queued-imms)"),
           "SendData over the immediate-value queue limit");
    return;
  }
  if (req.has_source()) {
    on_send_data_rendezvous(id, req);
    return;
  }
  auto offset = static_cast<size_t>(frame.payload - buf.data());
  auto view = buf.slice(offset, frame.payload_len);
  if (!view) {
    reject(pb::make_send_data_response(id, pb::LENGTH_MISMATCH,
                                       "payload outside the message"),
           "SendData");
    return;
  }
  // Rendezvous chunks still being read count as well.
  auto queued = out_.queued_data_bytes() + inbound_.bytes();
  if (queued > opts_.peer_max_queued_bytes
      || view->size() > opts_.peer_max_queued_bytes - queued) {
    reject(
        pb::make_send_data_response(
            id, pb::QUOTA_EXCEEDED,
            std::to_string(queued)
                + " bytes you sent are not claimed yet (peer-max-queued-bytes="
                + std::to_string(opts_.peer_max_queued_bytes) + ")"),
        "SendData over the queue limit");
    return;
  }
  local_mr chunk;
  // Zero copy while few receive buffers are held by users; beyond half of
  // the pool, copy out so the peer keeps its send credits.
  if (tuning::zero_copy_receive(held_buffers_->load(), link_.recv_depth)) {
    auto held = held_buffers_;
    ++*held;
    auto inner = std::move(*view);
    auto block
        = std::make_shared<mr_block>(inner.data(), inner.size(), inner.lkey(),
                                     inner.rkey(), [inner, held]() mutable {
                                       --*held;
                                       inner = local_mr{};
                                     });
    chunk = local_mr{std::move(block)};
  } else {
    auto copy = pool_->allocate(view->size(), 64,
                                transport::access::local_write, false);
    if (!copy) {
      reject(pb::make_send_data_response(id, pb::OUT_OF_MEMORY,
                                         what_of(copy.error())),
             "SendData (no memory for the copy)");
      return;
    }
    if (view->size() > 0)
      std::memcpy(copy->data(), view->data(), view->size());
    chunk = std::move(*copy);
  }
  accepted();
  deliver_in_order(id, std::move(chunk),
                   req.has_imm() ? std::optional<uint32_t>{req.imm()}
                                 : std::nullopt);
}

void agent_core::on_request(const pb::Request& req, const local_mr& buf,
                            const pb::decode_result& frame) {
  auto id = req.request_id();
  switch (req.body_case()) {
    case pb::Request::kAllocMr:
      on_alloc_mr(id, req.alloc_mr());
      break;
    case pb::Request::kReleaseMr:
      on_release_mr(id, req.release_mr());
      break;
    case pb::Request::kSendMr:
      on_send_mr(id, req.send_mr());
      break;
    case pb::Request::kSendData:
      on_piggybacked_acks(req.send_data());
      on_send_data(id, req.send_data(), buf, frame);
      break;
    case pb::Request::kRenewLease:
      on_renew_lease(id, req.renew_lease());
      break;
    case pb::Request::kActorLookup:
      on_actor_lookup(id, req.actor_lookup());
      break;
    case pb::Request::kActorMessage:
      on_actor_rendezvous(id, req.actor_message());
      break;
    case pb::Request::kPing:
      // Keepalive: cheap, and answered even when our own keepalive is off.
      accepted();
      out_.upkeep_frame();
      send_unsolicited(pb::make_pong(id), true);
      break;
    default:
      ++counters_.protocol_errors;
      if (auto v = may_log(spdlog::level::warn))
        log().warn("agent {}: request without a body{}", link_.peer,
                   suppressed_note(v.denied_before));
      count_noise("a request without a body");
  }
}

// -- cumulative acknowledgements ----------------------------------------------

void agent_core::flush_acks() {
  auto ids = acks_.take();
  if (ids.empty() || closed_)
    return;
  counters_.merged_acks_sent += ids.size() - 1;
  send_unsolicited(pb::make_send_data_acks(ids));
}

/// Acknowledges the SendData `id` (OK): at once, or gathered into one
/// cumulative response when the peer takes those.
void agent_core::ack_send_data(uint64_t id) {
  if (!peer_takes_cumulative_acks_) {
    send_unsolicited(pb::make_send_data_response(id, pb::OK, {}));
    return;
  }
  // Gather until the frames queued now are handled: the owner flushes
  // behind them.  A full response goes at once.
  switch (acks_.add(id)) {
    case ack_gatherer::step::flush_now:
      flush_acks();
      break;
    case ack_gatherer::step::schedule_flush:
      out_.schedule_ack_flush();
      break;
    case ack_gatherer::step::none:
      break;
  }
}

// The largest SendData header with acknowledgements still goes in the
// transport's header slot (no spill into pool memory).
static_assert(pb::max_frame_overhead + pb::imm_frame_overhead
                  + pb::piggyback_ack_overhead(tuning::max_acks_per_response)
              <= transport::max_send_header_bytes);

bool agent_core::acks_may_ride() const noexcept {
  return !acks_.empty() && !closed_ && peer_offers(pb::EXT_PIGGYBACK_ACKS);
}

/// How many gathered acknowledgements (the oldest) may ride on our next
/// SendData: as many as `room` bytes of its frame take, so they need no
/// response of their own.
size_t agent_core::acks_that_fit(size_t room) const noexcept {
  return acks_may_ride() ? acks_.fit(room) : 0;
}

/// The first `n` acknowledgements went out on a SendData.
void agent_core::acks_attached(size_t n) {
  acks_.attached(n);
  counters_.piggybacked_acks_sent += n;
}

/// Completes the requests of ours that the peer's SendData acknowledges
/// (SendData.acked): OK, as a SendDataResponse would.  Ids that are not
/// pending are counted and dropped like any unknown id; a list longer than
/// the protocol allows is dropped whole.
void agent_core::on_piggybacked_acks(const pb::SendData& req) {
  if (req.acked_size() == 0)
    return;
  if (static_cast<size_t>(req.acked_size()) > tuning::max_acks_per_response) {
    ++counters_.protocol_errors;
    if (auto v = may_log(spdlog::level::warn))
      log().warn("agent {}: a SendData acknowledged {} requests (at most {}); "
                 "ignored them{}",
                 link_.peer, req.acked_size(), tuning::max_acks_per_response,
                 suppressed_note(v.denied_before));
    count_noise("a SendData that acknowledged too many requests");
    return;
  }
  static const pb::Response ok = [] {
    pb::Response r;
    r.mutable_send_data()->set_status(pb::OK);
    return r;
  }();
  complete_acked(req.acked(), ok, counters_.piggybacked_acks_received);
}

/// Completes each pending request in `ids` with `res` (an OK
/// SendDataResponse), counting it in `taken`; ids that are not pending are
/// counted and dropped like any unknown id.
void agent_core::complete_acked(
    const google::protobuf::RepeatedField<uint64_t>& ids,
    const pb::Response& res, uint64_t& taken) {
  for (auto id : ids) {
    if (!requests_.pending(id)) {
      ++counters_.protocol_errors;
      if (!requests_.take_late(id))
        count_noise("an acknowledgement of an unknown request");
      continue;
    }
    ++taken;
    requests_.complete(id, &res, caf::error{});
  }
}

/// Completes the requests a cumulative SendDataResponse acknowledges
/// besides its own request_id.  Only an OK response may carry them; ids
/// that are not pending are counted and dropped like any unknown id.
void agent_core::on_also_acked(const pb::Response& res) {
  if (res.body_case() != pb::Response::kSendData
      || res.send_data().also_acked_size() == 0)
    return;
  if (pb::status_of(res) != pb::OK) {
    ++counters_.protocol_errors;
    if (auto v = may_log(spdlog::level::warn))
      log().warn("agent {}: a refusal acknowledged more requests; ignored "
                 "them{}",
                 link_.peer, suppressed_note(v.denied_before));
    count_noise("a refusal that acknowledged more requests");
    return;
  }
  complete_acked(res.send_data().also_acked(), res,
                 counters_.merged_acks_received);
}

// -- responses and Hello ------------------------------------------------------

/// Releases the region of a late OK answer to an AllocMR that timed out;
/// returns whether `res` was one.
bool agent_core::release_late_alloc(const pb::Response& res) {
  if (!requests_.take_late_alloc(res.request_id()))
    return false;
  if (res.body_case() == pb::Response::kAllocMr && pb::status_of(res) == pb::OK
      && res.alloc_mr().has_token()) {
    if (auto v = may_log(spdlog::level::info))
      log().info("agent {}: releasing the region of a late AllocMR answer{}",
                 link_.peer, suppressed_note(v.denied_before));
    release_remote(pb::token_of(res.alloc_mr().token()), now_);
  }
  return true;
}

void agent_core::on_response(const pb::Response& res) {
  if (res.body_case() == pb::Response::kPong) {
    on_pong(res);
    return;
  }
  auto id = res.request_id();
  if (!requests_.pending(id) && release_late_alloc(res))
    return;
  if (!requests_.pending(id)) {
    // Counted and dropped.  Not a violation: a response may arrive after
    // its request timed out.  Noise unless it is one of those.
    ++counters_.protocol_errors;
    if (requests_.take_late(id)) {
      if (auto v = may_log(spdlog::level::info))
        log().info("agent {}: dropped a late response to request {} (it "
                   "timed out){}",
                   link_.peer, id, suppressed_note(v.denied_before));
      return;
    }
    if (auto v = may_log(spdlog::level::warn))
      log().warn("agent {}: dropped a response for unknown request {}{}",
                 link_.peer, id, suppressed_note(v.denied_before));
    count_noise("a response for an unknown request");
    return;
  }
  requests_.complete(id, &res, caf::error{});
  on_also_acked(res);
}

void agent_core::on_hello(const pb::Hello& hello) {
  peer_takes_cumulative_acks_ = hello.cumulative_acks();
  live_.offered(hello.goodbye(), hello.keepalive());
  hello_seen_ = true;
  peer_extensions_ = hello.extensions();
  // A peer reads our rendezvous chunks only if it said how much at once.
  if ((peer_extensions_ & pb::EXT_RENDEZVOUS) != 0)
    peer_max_rendezvous_bytes_ = hello.max_rendezvous_bytes();
  if (hello.version() == pb::protocol_version) {
    if (opts_.remote_actors && peer_offers(pb::EXT_REMOTE_ACTORS)) {
      bool flow = opts_.actor_flow && peer_offers(pb::EXT_ACTOR_FLOW);
      out_.actor_flow(flow,
                      std::max<uint64_t>(1, hello.actor_window_messages()),
                      std::max<uint64_t>(1, hello.actor_window_bytes()));
    }
    hello_waiters_.run(peer_extensions_, link_.peer);
  } else
    end_connection(make_error(errc::version_mismatch,
                              "the peer speaks agent protocol version "
                                  + std::to_string(hello.version())),
                   "the peer speaks protocol version "
                       + std::to_string(hello.version()) + ", we speak "
                       + std::to_string(pb::protocol_version));
}

void agent_core::on_frame(const local_mr& buf, time_point now) {
  now_ = now;
  // Any frame, even one we refuse, shows the peer's agent is alive.
  live_.heard(now);
  pb::Message msg;
  auto frame
      = pb::decode(buf.data(), buf.size(), link_.max_message_len_bytes, msg);
  if (frame.code != errc::none) {
    ++counters_.protocol_errors;
    if (auto v = may_log(spdlog::level::warn))
      log().warn("agent {}: rejected an inbound frame of {} bytes: {} ({}){}",
                 link_.peer, buf.size(), to_string(frame.code),
                 describe(frame.code), suppressed_note(v.denied_before));
    count_violation();
    // A SendData whose length disagrees with its payload still names its
    // request: answer it so the peer does not wait for the timeout.
    if (frame.code == errc::payload_mismatch && msg.has_request()
        && msg.request().has_send_data())
      reject(pb::make_send_data_response(
                 msg.request().request_id(), pb::LENGTH_MISMATCH,
                 "SendData.len says "
                     + std::to_string(msg.request().send_data().len())
                     + " bytes but another amount arrived"),
             "SendData with a wrong length");
    return;
  }
  switch (msg.body_case()) {
    case pb::Message::kRequest:
      on_request(msg.request(), buf, frame);
      break;
    case pb::Message::kResponse:
      on_response(msg.response());
      break;
    case pb::Message::kHello:
      on_hello(msg.hello());
      break;
    case pb::Message::kGoodbye:
      on_goodbye(msg.goodbye());
      break;
    case pb::Message::kActorMessage:
      on_actor_message(msg.actor_message(), frame);
      break;
    case pb::Message::kActorAck:
      on_actor_ack(msg.actor_ack());
      break;
    default:
      ++counters_.protocol_errors;
      count_noise("a frame of an unknown kind");
  }
}

} // namespace rdmactor
