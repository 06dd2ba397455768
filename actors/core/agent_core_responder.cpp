// The agent's protocol core: the responder, which serves the untrusted
// peer's requests and matches its responses.  Every field from the wire is
// checked here.

#include "actors/core/agent_core.hpp"

#include <algorithm>
#include <cstring>

#include "common/logging.hpp"
#include "common/tuning.hpp"
#include "protocol/frame_scratch.hpp"

namespace rdmactor {

namespace pb = protocol;

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

void agent_core::on_request(const pb::Request& req, const local_mr& buf,
                            const pb::decode_result& frame) {
  auto id = req.request_id();
  switch (req.body_case()) {
    case pb::Request::kAllocMr:
      regions_.on_alloc_mr(id, req.alloc_mr());
      break;
    case pb::Request::kReleaseMr:
      regions_.on_release_mr(id, req.release_mr());
      break;
    case pb::Request::kSendMr:
      regions_.on_send_mr(id, req.send_mr());
      break;
    case pb::Request::kSendData:
      data_.on_piggybacked_acks(req.send_data());
      data_.on_send_data(id, req.send_data(), buf, frame);
      break;
    case pb::Request::kRenewLease:
      regions_.on_renew_lease(id, req.renew_lease());
      break;
    case pb::Request::kActorLookup:
      actors_.on_lookup(id, req.actor_lookup());
      break;
    case pb::Request::kActorMessage:
      actors_.on_rendezvous(id, req.actor_message());
      break;
    case pb::Request::kPing:
      live_.on_ping(id);
      break;
    default:
      ++counters_.protocol_errors;
      if (auto v = may_log(spdlog::level::warn))
        log().warn("agent {}: request without a body{}", link_.peer,
                   suppressed_note(v.denied_before));
      count_noise("a request without a body");
  }
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
    regions_.release(pb::token_of(res.alloc_mr().token()), now_);
  }
  return true;
}

void agent_core::on_response(const pb::Response& res) {
  if (res.body_case() == pb::Response::kPong) {
    live_.on_pong(res);
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
  // Upkeep: it starts no polling tail (see `start`).
  out_.upkeep_frame();
  live_.offered(hello.goodbye(), hello.keepalive(), hello.node());
  hello_seen_ = true;
  peer_extensions_ = hello.extensions();
  // A peer reads our rendezvous chunks only if it said how much at once.
  data_.peer_hello(hello.cumulative_acks(),
                   (peer_extensions_ & pb::EXT_RENDEZVOUS) != 0
                       ? hello.max_rendezvous_bytes()
                       : 0);
  if (hello.version() == pb::protocol_version) {
    if (opts_.remote_actors && peer_offers(pb::EXT_REMOTE_ACTORS)) {
      bool flow = opts_.actor_flow && peer_offers(pb::EXT_ACTOR_FLOW);
      out_.actor_flow(flow,
                      std::max<uint64_t>(1, hello.actor_window_messages()),
                      std::max<uint64_t>(1, hello.actor_window_bytes()));
    }
    if (peer_offers(pb::EXT_PACKED_FRAMES))
      out_.pack_frames(link_.max_message_len_bytes);
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
  // The frames packed into this message (EXT_PACKED_FRAMES, which we
  // offer), in order, until the last or the first one refused.
  size_t offset = 0;
  for (size_t served = 1;; ++served) {
    auto frame = on_one_frame(buf, offset);
    if (!frame.more || closed_)
      return;
    if (served == tuning::max_packed_frames) {
      ++counters_.protocol_errors;
      if (auto v = may_log(spdlog::level::warn))
        log().warn("agent {}: refused the frames beyond the first {} of one "
                   "message (the peer packs more than rdmactor does){}",
                   link_.peer, served, suppressed_note(v.denied_before));
      count_violation();
      return;
    }
    offset += frame.frame_len;
  }
}

pb::decode_result agent_core::on_one_frame(const local_mr& buf, size_t offset) {
  // Decoded on the thread's reused arena: no heap allocation for a frame
  // of the data path.
  pb::frame_scratch scratch;
  auto& msg = scratch.message();
  auto frame = scratch.decode(buf.data() + offset, buf.size() - offset,
                              link_.max_message_len_bytes, true);
  if (frame.code != errc::none) {
    ++counters_.protocol_errors;
    if (auto v = may_log(spdlog::level::warn))
      log().warn("agent {}: rejected an inbound frame of {} bytes: {} ({}){}",
                 link_.peer, buf.size() - offset, to_string(frame.code),
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
    frame.more = false; // what follows cannot be found
    return frame;
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
      live_.on_goodbye(msg.goodbye());
      if (frame.more) {
        // The peer's last frame: nothing may follow it.
        ++counters_.protocol_errors;
        count_noise("frames packed behind a Goodbye");
        frame.more = false;
      }
      break;
    case pb::Message::kActorMessage:
      actors_.on_message(msg.actor_message(), frame);
      break;
    case pb::Message::kActorAck:
      actors_.on_ack(msg.actor_ack());
      break;
    default:
      ++counters_.protocol_errors;
      count_noise("a frame of an unknown kind");
  }
  return frame;
}

} // namespace rdmactor
