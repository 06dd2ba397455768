// The agent: the responder, which serves the untrusted peer's requests and
// matches its responses.  Every field from the wire is checked here.

#include "actors/agent_state.hpp"

#include "common/logging.hpp"

namespace rdmactor::agent_detail {

// -- requests from the peer ---------------------------------------------------

/// Counts one refusal or malformed frame; disconnects a peer that keeps
/// violating.
void count_violation(self_ptr self) {
  auto& st = self->state;
  if (++st.violations < st.opts.peer_max_violations || st.down)
    return;
  log().error("agent {}: {} refused requests or malformed frames in a row; "
              "disconnecting the peer",
              st.link.peer, st.violations);
  self->send_exit(st.transport,
                  make_error(errc::quota_exceeded,
                             "the peer kept violating the protocol or its "
                             "limits (peer-max-violations)"));
}

void reject(self_ptr self, pb::Message res, const char* what) {
  ++self->state.counters.rejected_requests;
  log().warn("agent {}: rejected {} from the peer", self->state.link.peer,
             what);
  send_unsolicited(self, res);
  count_violation(self);
}

/// Forgets an owned region; the memory returns when the last handle goes.
local_mr erase_owned(self_ptr self, std::map<mr_token, owned_mr>::iterator i) {
  auto& st = self->state;
  if (i->second.by_peer) {
    st.peer_alloc_bytes -= i->second.mr.size();
    st.peer_mrs -= 1;
  }
  auto mr = std::move(i->second.mr);
  st.owned.erase(i);
  return mr;
}

/// Marks a request from the peer as served within its limits.
void accepted(self_ptr self) {
  self->state.violations = 0;
}

void on_alloc_mr(self_ptr self, uint64_t id, const pb::AllocMR& req) {
  auto& st = self->state;
  auto err = st.pool->check_layout(req.size(), req.align());
  if (!err && req.align() > memory_pool::arena_align_bytes)
    err = make_error(errc::invalid_layout,
                     "alignment " + std::to_string(req.align())
                         + " exceeds the "
                         + std::to_string(memory_pool::arena_align_bytes)
                         + " bytes a peer may ask for");
  if (err) {
    reject(self,
           pb::make_alloc_mr_response(id, pb::to_status(code_of(err)),
                                      what_of(err)),
           "AllocMR with an invalid layout");
    return;
  }
  if (st.peer_mrs >= st.opts.peer_max_mrs
      || req.size() > st.opts.peer_max_alloc_bytes - st.peer_alloc_bytes) {
    reject(self,
           pb::make_alloc_mr_response(
               id, pb::QUOTA_EXCEEDED,
               "you hold " + std::to_string(st.peer_mrs) + " regions of "
                   + std::to_string(st.peer_alloc_bytes)
                   + " bytes here; the limits are peer-max-mrs="
                   + std::to_string(st.opts.peer_max_mrs)
                   + " and peer-max-alloc-"
                   + "bytes=" + std::to_string(st.opts.peer_max_alloc_bytes)),
           "AllocMR over the peer's quota");
    return;
  }
  auto mr = st.pool->allocate(req.size(), req.align(), peer_access);
  if (!mr) {
    auto code = code_of(mr.error());
    reject(self,
           pb::make_alloc_mr_response(id, pb::to_status(code),
                                      what_of(mr.error())),
           "AllocMR");
    return;
  }
  auto token = mr->token();
  st.peer_alloc_bytes += mr->size();
  st.peer_mrs += 1;
  st.owned.emplace(token, owned_mr{std::move(*mr), true});
  accepted(self);
  send_unsolicited(self,
                   pb::make_alloc_mr_response(id, pb::OK, {}, to_pb(token)));
}

void on_release_mr(self_ptr self, uint64_t id, const pb::ReleaseMR& req) {
  auto& st = self->state;
  auto i = st.owned.find(to_token(req.token()));
  if (i == st.owned.end()) {
    reject(self,
           pb::make_release_mr_response(id, pb::UNKNOWN_TOKEN,
                                        "no memory region with this token is "
                                        "held for you"),
           "ReleaseMR of an unknown token");
    return;
  }
  erase_owned(self, i);
  accepted(self);
  send_unsolicited(self, pb::make_release_mr_response(id, pb::OK, {}));
}

void on_send_mr(self_ptr self, uint64_t id, const pb::SendMR& req) {
  auto& st = self->state;
  auto token = to_token(req.token());
  if (req.kind() == pb::SendMR::LOCAL) {
    // The peer lends us its memory.
    if (st.remote_mrs.items.size() >= st.opts.peer_max_queued_mrs) {
      reject(self,
             pb::make_send_mr_response(
                 id, pb::QUOTA_EXCEEDED,
                 "too many unclaimed memory regions queued here "
                 "(peer-max-queued-mrs="
                     + std::to_string(st.opts.peer_max_queued_mrs) + ")"),
             "SendMR LOCAL over the queue limit");
      return;
    }
    auto state = std::make_shared<remote_mr_state>(
        token, caf::actor_cast<caf::actor_addr>(self));
    put(self, st.remote_mrs, remote_mr{std::move(state)});
    accepted(self);
    send_unsolicited(self, pb::make_send_mr_response(id, pb::OK, {}));
    return;
  }
  // The peer hands back memory we own.
  auto i = st.owned.find(token);
  if (i == st.owned.end()) {
    reject(self,
           pb::make_send_mr_response(id, pb::NOT_OWNED,
                                     "this node does not own a memory region "
                                     "with this token on your behalf"),
           "SendMR REMOTE of a token we do not own");
    return;
  }
  put(self, st.local_mrs, erase_owned(self, i));
  accepted(self);
  send_unsolicited(self, pb::make_send_mr_response(id, pb::OK, {}));
}

void on_send_data(self_ptr self, uint64_t id, const local_mr& buf,
                  const pb::decode_result& frame) {
  auto& st = self->state;
  auto offset = static_cast<size_t>(frame.payload - buf.data());
  auto view = buf.slice(offset, frame.payload_len);
  if (!view) {
    reject(self,
           pb::make_send_data_response(id, pb::LENGTH_MISMATCH,
                                       "payload outside the message"),
           "SendData");
    return;
  }
  if (view->size() > st.opts.peer_max_queued_bytes - st.data.queued_bytes) {
    reject(
        self,
        pb::make_send_data_response(
            id, pb::QUOTA_EXCEEDED,
            std::to_string(st.data.queued_bytes)
                + " bytes you sent are not claimed yet (peer-max-queued-bytes="
                + std::to_string(st.opts.peer_max_queued_bytes) + ")"),
        "SendData over the queue limit");
    return;
  }
  local_mr chunk;
  // Zero copy while few receive buffers are held by users; beyond half of
  // the pool, copy out so the peer keeps its send credits.
  if (tuning::zero_copy_receive(st.held_buffers->load(), st.link.recv_depth)) {
    auto held = st.held_buffers;
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
    auto copy = st.pool->allocate(view->size(), 64,
                                  transport::access::local_write, false);
    if (!copy) {
      reject(self,
             pb::make_send_data_response(id, pb::OUT_OF_MEMORY,
                                         what_of(copy.error())),
             "SendData (no memory for the copy)");
      return;
    }
    if (view->size() > 0)
      std::memcpy(copy->data(), view->data(), view->size());
    chunk = std::move(*copy);
  }
  if (st.subscriber)
    self->send(st.subscriber, data_atom::value, std::move(chunk));
  else
    put(self, st.data, std::move(chunk));
  accepted(self);
  ack_send_data(self, id);
}

void flush_acks(self_ptr self) {
  auto& st = self->state;
  st.acks_flush_scheduled = false;
  if (st.acks.empty() || st.down)
    return;
  st.counters.merged_acks_sent += st.acks.size() - 1;
  send_unsolicited(self, pb::make_send_data_acks(st.acks));
  st.acks.clear();
}

void ack_send_data(self_ptr self, uint64_t id) {
  auto& st = self->state;
  if (!st.peer_takes_cumulative_acks) {
    send_unsolicited(self, pb::make_send_data_response(id, pb::OK, {}));
    return;
  }
  // Gather until the frames queued now are handled: the flush message goes
  // behind them in our mailbox.  A full response goes at once.
  st.acks.push_back(id);
  if (st.acks.size() >= tuning::max_acks_per_response) {
    flush_acks(self);
    return;
  }
  if (!st.acks_flush_scheduled) {
    st.acks_flush_scheduled = true;
    self->send(self, flush_acks_atom::value);
  }
}

/// Completes the requests a cumulative SendDataResponse acknowledges
/// besides its own request_id.  Only an OK response may carry them; ids
/// that are not pending are counted and dropped like any unknown id.
void on_also_acked(self_ptr self, const pb::Response& res) {
  auto& st = self->state;
  if (res.body_case() != pb::Response::kSendData
      || res.send_data().also_acked_size() == 0)
    return;
  if (pb::status_of(res) != pb::OK) {
    ++st.counters.protocol_errors;
    log().warn("agent {}: a refusal acknowledged more requests; ignored them",
               st.link.peer);
    return;
  }
  for (auto id : res.send_data().also_acked()) {
    if (st.pending.count(id) == 0) {
      ++st.counters.protocol_errors;
      continue;
    }
    ++st.counters.merged_acks_received;
    complete(self, id, &res, caf::error{});
  }
}

void on_request(self_ptr self, const pb::Request& req, const local_mr& buf,
                const pb::decode_result& frame) {
  auto id = req.request_id();
  switch (req.body_case()) {
    case pb::Request::kAllocMr:
      on_alloc_mr(self, id, req.alloc_mr());
      break;
    case pb::Request::kReleaseMr:
      on_release_mr(self, id, req.release_mr());
      break;
    case pb::Request::kSendMr:
      on_send_mr(self, id, req.send_mr());
      break;
    case pb::Request::kSendData:
      on_send_data(self, id, buf, frame);
      break;
    default:
      ++self->state.counters.protocol_errors;
      log().warn("agent {}: request without a body", self->state.link.peer);
  }
}

/// Releases the region of a late OK answer to an AllocMR that timed out;
/// returns whether `res` was one.
bool release_late_alloc(self_ptr self, const pb::Response& res) {
  auto& late = self->state.late_allocs;
  auto i = std::find(late.begin(), late.end(), res.request_id());
  if (i == late.end())
    return false;
  late.erase(i);
  if (res.body_case() == pb::Response::kAllocMr && pb::status_of(res) == pb::OK
      && res.alloc_mr().has_token()) {
    log().info("agent {}: releasing the region of a late AllocMR answer",
               self->state.link.peer);
    release(self, to_token(res.alloc_mr().token()), false);
  }
  return true;
}

void on_message(self_ptr self, local_mr& buf) {
  auto& st = self->state;
  pb::Message msg;
  auto frame
      = pb::decode(buf.data(), buf.size(), st.link.max_message_len_bytes, msg);
  if (frame.code != errc::none) {
    ++st.counters.protocol_errors;
    count_violation(self);
    log().warn("agent {}: rejected an inbound frame of {} bytes: {} ({})",
               st.link.peer, buf.size(), to_string(frame.code),
               describe(frame.code));
    // A SendData whose length disagrees with its payload still names its
    // request: answer it so the peer does not wait for the timeout.
    if (frame.code == errc::payload_mismatch && msg.has_request()
        && msg.request().has_send_data())
      reject(self,
             pb::make_send_data_response(
                 msg.request().request_id(), pb::LENGTH_MISMATCH,
                 "SendData.len says "
                     + std::to_string(msg.request().send_data().len())
                     + " bytes but another amount arrived"),
             "SendData with a wrong length");
    return;
  }
  switch (msg.body_case()) {
    case pb::Message::kRequest:
      on_request(self, msg.request(), buf, frame);
      break;
    case pb::Message::kResponse: {
      auto id = msg.response().request_id();
      if (st.pending.count(id) == 0 && release_late_alloc(self, msg.response()))
        return;
      if (st.pending.count(id) == 0) {
        log().warn("agent {}: dropped a response for unknown request {}",
                   st.link.peer, id);
        // Not a violation: a response may arrive after its request timed
        // out.  Counted and dropped.
        ++st.counters.protocol_errors;
        return;
      }
      complete(self, id, &msg.response(), caf::error{});
      on_also_acked(self, msg.response());
      break;
    }
    case pb::Message::kHello:
      st.peer_takes_cumulative_acks = msg.hello().cumulative_acks();
      if (msg.hello().version() != pb::protocol_version) {
        log().error("agent {}: the peer speaks protocol version {}, we speak "
                    "{}; closing",
                    st.link.peer, msg.hello().version(), pb::protocol_version);
        self->send_exit(
            st.transport,
            make_error(errc::version_mismatch,
                       "the peer speaks agent protocol version "
                           + std::to_string(msg.hello().version())));
      }
      break;
    default:
      ++st.counters.protocol_errors;
  }
}

} // namespace rdmactor::agent_detail
