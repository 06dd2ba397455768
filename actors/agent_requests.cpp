// The agent: requests to the peer, their ids and timeouts.

#include "actors/agent_state.hpp"

#include "common/logging.hpp"

namespace rdmactor::agent_detail {

std::chrono::milliseconds request_timeout(self_ptr self) {
  return std::chrono::milliseconds{self->state.opts.request_timeout_ms};
}

uint64_t new_request_id(self_ptr self) {
  auto& st = self->state;
  for (;;) {
    auto id = st.rng() & ~reserved_id_bit;
    if (id != 0 && st.pending.count(id) == 0)
      return id;
  }
}

/// Encodes `msg` into a header buffer for the transport.
caf::expected<std::vector<uint8_t>> encode(self_ptr self,
                                           const pb::Message& msg) {
  std::vector<uint8_t> buf(pb::frame_header_len + msg.ByteSizeLong());
  auto res = pb::encode(msg, buf.data(), buf.size(),
                        self->state.link.max_message_len_bytes);
  if (res.code != errc::none)
    return make_error(res.code, std::string{"cannot encode "}
                                    + pb::kind_name(msg) + ": "
                                    + describe(res.code));
  buf.resize(res.header_len);
  return buf;
}

/// How often an agent with waiting requests looks for expired ones: a
/// twentieth of the timeout, between 1 and 100 ms.  Calls end between
/// request-timeout-ms and request-timeout-ms plus this interval.
std::chrono::milliseconds sweep_interval(self_ptr self) {
  return std::chrono::milliseconds{
      tuning::sweep_interval_ms(self->state.opts.request_timeout_ms)};
}

/// Makes sure one sweep is scheduled.  One timer per agent instead of one
/// per request: a request costs a map entry, not a clock-thread entry and
/// a message that always comes back.
void arm_sweep(self_ptr self) {
  auto& st = self->state;
  if (st.sweep_armed)
    return;
  st.sweep_armed = true;
  self->delayed_send(self, sweep_interval(self), timeout_atom::value);
}

/// Deadlines use the actor system's clock (steady_clock, or the test
/// coordinator's simulated one in the fuzz target).
clock_type::time_point deadline(self_ptr self) {
  return self->clock().now() + request_timeout(self);
}

/// Sends a response (or Hello) as a post: nothing waits for it; a send
/// that fails takes the connection down.
void send_unsolicited(self_ptr self, const pb::Message& msg) {
  auto buf = encode(self, msg);
  if (!buf) {
    log().error("agent {}: {}", self->state.link.peer, render(buf.error()));
    return;
  }
  // No answer wanted: a failed send takes the connection down (qp_down).
  self->send(self->state.transport, transport::post_atom::value,
             std::move(*buf), local_mr{});
}

/// Finishes a pending request exactly once.
void complete(self_ptr self, uint64_t id, const pb::Response* res,
              const caf::error& err) {
  auto& st = self->state;
  auto i = st.pending.find(id);
  if (i == st.pending.end())
    return;
  auto fn = std::move(i->second.done);
  st.pending.erase(i);
  fn(res, err);
}

/// Sends a request with `payload` behind it and calls `done` with the
/// response, or with an error (send failure, timeout, peer gone).
void send_request(self_ptr self, pb::Message msg, local_mr payload,
                  completion_fn done) {
  auto& st = self->state;
  if (st.down) {
    done(nullptr,
         make_error(errc::peer_gone, "the peer " + st.link.peer + " is gone"));
    return;
  }
  if (st.pending.size() >= st.opts.peer_max_pending_requests) {
    done(nullptr, make_error(errc::quota_exceeded,
                             std::to_string(st.pending.size()) + " requests to "
                                 + st.link.peer
                                 + " are waiting for answers (peer-max-pending-"
                                   "requests); wait for some to finish"));
    return;
  }
  auto id = msg.request().request_id();
  auto buf = encode(self, msg);
  if (!buf) {
    done(nullptr, buf.error());
    return;
  }
  st.pending.emplace(id, pending_request{std::move(done), deadline(self)});
  arm_sweep(self);
  // The peer's response completes the request; a send that fails takes
  // the connection down, and `shut_down` fails every pending request.  So
  // the transport need not answer the send itself (one message less per
  // request on the data path).
  self->send(st.transport, transport::post_atom::value, std::move(*buf),
             std::move(payload));
}

/// Turns a non-OK response status into an error.
caf::error status_error(const pb::Response& res, const char* what) {
  auto status = pb::status_of(res);
  auto detail = pb::detail_of(res);
  auto code = pb::to_errc(status);
  if (code == errc::none) // only called for refusals; never "no error"
    code = errc::malformed_message;
  return make_error(
      code, std::string{"the peer refused "} + what + ": "
                + pb::to_string(status)
                + (detail.empty() ? std::string{} : " (" + detail + ")"));
}

/// Ends what waited past its deadline: requests with `request_timeout`,
/// receive calls likewise; re-arms while anything still waits.
void sweep(self_ptr self) {
  auto& st = self->state;
  st.sweep_armed = false;
  auto now = self->clock().now();
  std::vector<uint64_t> expired;
  for (auto& kv : st.pending)
    if (kv.second.deadline <= now)
      expired.push_back(kv.first);
  for (auto id : expired)
    complete(self, id, nullptr,
             make_error(errc::request_timeout,
                        "no answer from " + st.link.peer + " within "
                            + std::to_string(st.opts.request_timeout_ms)
                            + " ms (request-timeout-ms)"));
  bool waiting = expire(self, st.data, now);
  waiting = expire(self, st.local_mrs, now) || waiting;
  waiting = expire(self, st.remote_mrs, now) || waiting;
  if ((waiting || !st.pending.empty()) && !st.down)
    arm_sweep(self);
}

/// Checks that `res` answers a request of kind `expected` with status OK:
/// another kind is `malformed_message`, a refusal carries the peer's code.
caf::error check_response(const pb::Response& res,
                          pb::Response::BodyCase expected, const char* what) {
  if (res.body_case() != expected)
    return make_error(errc::malformed_message,
                      std::string{"the peer answered "} + what
                          + " with a response of another kind");
  if (pb::status_of(res) != pb::OK)
    return status_error(res, what);
  return {};
}

mr_token to_token(const pb::MrToken& t) {
  return mr_token{t.addr(), t.len(), t.rkey()};
}

pb::MrToken to_pb(const mr_token& t) {
  return pb::make_token(t.addr, t.len, t.rkey);
}

} // namespace rdmactor::agent_detail
