#include "actors/agent.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "common/error.hpp"
#include "common/logging.hpp"
#include "protocol/codec.hpp"
#include "protocol/messages.hpp"

namespace rdmactor {

namespace {

namespace pb = protocol;
using transport::link_params;
using transport::transport_actor;

/// Request ids leave the top bit clear (room for a future flag).
constexpr uint64_t reserved_id_bit = uint64_t{1} << 63;

/// Access rights of memory allocated on behalf of the peer.
constexpr uint32_t peer_access = transport::access::local_write
                                 | transport::access::remote_write
                                 | transport::access::remote_read;

using completion_fn
    = std::function<void(const pb::Response* res, const caf::error& err)>;

/// A request to the peer waiting for its response.
struct pending_request {
  completion_fn done;
  std::chrono::steady_clock::time_point deadline;
};

using clock_type = std::chrono::steady_clock;

template <class T>
struct waiter {
  caf::typed_response_promise<T> rp;
  clock_type::time_point deadline;
};

/// A queue of items the peer sent plus the users waiting for one.
template <class T>
struct mailbox {
  std::deque<T> items;
  std::deque<waiter<T>> waiters;
  uint64_t queued_bytes = 0; // of `items`
};

uint64_t weight(const local_mr& x) {
  return x.size();
}

uint64_t weight(const remote_mr&) {
  return 0;
}

/// A memory region kept alive for the peer.
struct owned_mr {
  local_mr mr;
  bool by_peer; // allocated by the peer's AllocMR (counts to its quota)
};

/// One SendData call split into chunks.
struct send_data_job {
  caf::typed_response_promise<uint64_t> rp;
  local_mr mr;          // what is being sent
  size_t chunk_max = 0; // payload bytes per message
  size_t window = 1;    // chunks in flight at most
  size_t offset = 0;    // next byte to send
  size_t chunks = 0;    // chunks issued so far
  size_t outstanding = 0;
  uint64_t bytes = 0;
  bool failed = false;
};

struct agent_state {
  transport_actor transport;
  memory_pool_ptr pool;
  options opts;
  link_params link;
  std::mt19937_64 rng{std::random_device{}()};
  std::unordered_map<uint64_t, pending_request> pending;
  bool sweep_armed = false; // a timeout_atom is on its way
  /// AllocMR requests that timed out (oldest first, bounded): a late OK
  /// answer to one is released at once instead of staying allocated on the
  /// peer until the connection closes.
  std::deque<uint64_t> late_allocs;
  std::map<mr_token, owned_mr> owned;
  uint64_t peer_alloc_bytes = 0; // sum over owned entries with by_peer
  uint32_t peer_mrs = 0;
  uint32_t violations = 0; // refusals in a row
  mailbox<local_mr> data;
  /// Takes every chunk as it arrives instead of `data` (subscribe_data).
  data_subscriber subscriber;
  mailbox<local_mr> local_mrs;
  mailbox<remote_mr> remote_mrs;
  /// Receive buffers held by users through zero-copy SendData handles.
  std::shared_ptr<std::atomic<uint32_t>> held_buffers
      = std::make_shared<std::atomic<uint32_t>>(0);
  agent_stats counters;
  bool down = false;

  static inline const char* name = "rdmactor.agent";
};

using self_ptr = agent_actor::stateful_pointer<agent_state>;

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
  auto ms = self->state.opts.request_timeout_ms / 20;
  return std::chrono::milliseconds{std::clamp<uint64_t>(ms, 1, 100)};
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

template <class T>
void put(self_ptr self, mailbox<T>& box, T item) {
  if (!box.waiters.empty()) {
    auto w = std::move(box.waiters.front());
    box.waiters.pop_front();
    w.rp.deliver(std::move(item));
    return;
  }
  box.queued_bytes += weight(item);
  box.items.emplace_back(std::move(item));
}

template <class T>
caf::typed_response_promise<T> take(self_ptr self, mailbox<T>& box) {
  auto rp = self->make_response_promise<T>();
  if (!box.items.empty()) {
    box.queued_bytes -= weight(box.items.front());
    rp.deliver(std::move(box.items.front()));
    box.items.pop_front();
    return rp;
  }
  if (self->state.down) {
    rp.deliver(make_error(errc::peer_gone,
                          "the peer " + self->state.link.peer + " is gone"));
    return rp;
  }
  box.waiters.push_back(waiter<T>{rp, deadline(self)});
  arm_sweep(self);
  return rp;
}

/// Fails the waiters of `box` whose deadline passed (they queue in deadline
/// order); returns whether any are left.
template <class T>
bool expire(self_ptr self, mailbox<T>& box, clock_type::time_point now) {
  while (!box.waiters.empty() && box.waiters.front().deadline <= now) {
    box.waiters.front().rp.deliver(
        make_error(errc::request_timeout,
                   "nothing arrived from " + self->state.link.peer + " within "
                       + std::to_string(self->state.opts.request_timeout_ms)
                       + " ms (request-timeout-ms)"));
    box.waiters.pop_front();
  }
  return !box.waiters.empty();
}

template <class T>
void fail_all(mailbox<T>& box, const caf::error& err) {
  for (auto& w : box.waiters)
    w.rp.deliver(err);
  box.waiters.clear();
  box.items.clear();
  box.queued_bytes = 0;
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
  if (st.held_buffers->load() < st.link.recv_depth / 2) {
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
  send_unsolicited(self, pb::make_send_data_response(id, pb::OK, {}));
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

caf::typed_response_promise<uint64_t> release(self_ptr self, mr_token token,
                                              bool answer);

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
      break;
    }
    case pb::Message::kHello:
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

// -- shutdown
// -------------------------------------------------------------------

/// Hands `owned` to the transport actor: the memory returns to the pool
/// when the transport has terminated, i.e. after its queue pair is closed
/// (CAF destroys an actor's state, and with it the QP, before it runs the
/// actor's attachables).  Until then the peer may still READ or WRITE
/// these regions through tokens it holds; releasing them earlier would let
/// it reach memory that already has a new owner.
void release_after_transport(self_ptr self,
                             std::map<mr_token, owned_mr> owned) {
  if (owned.empty())
    return;
  auto keep = std::make_shared<std::map<mr_token, owned_mr>>(std::move(owned));
  auto ptr = caf::actor_cast<caf::strong_actor_ptr>(self->state.transport);
  if (!ptr)
    return; // no transport: nothing can reach the memory any more
  ptr->get()->attach_functor([keep]() mutable { keep.reset(); });
}

void shut_down(self_ptr self, const caf::error& cause) {
  auto& st = self->state;
  if (st.down)
    return;
  st.down = true;
  auto err
      = code_of(cause) == errc::closed
            ? cause
            : make_error(errc::peer_gone, "the connection to " + st.link.peer
                                              + " is gone: " + render(cause));
  auto pending = std::move(st.pending);
  st.pending.clear();
  for (auto& kv : pending)
    kv.second.done(nullptr, err);
  fail_all(st.data, err);
  fail_all(st.local_mrs, err);
  for (auto& rmr : st.remote_mrs.items)
    rmr.state()->take(); // the peer freed it already
  fail_all(st.remote_mrs, err);
  // Everything held for the peer returns to the pool once the transport
  // (and its QP) is gone.
  release_after_transport(self, std::move(st.owned));
  st.owned.clear();
  st.peer_alloc_bytes = 0;
  st.peer_mrs = 0;
  self->send_exit(st.transport, err);
  self->quit(err);
}

// -- user operations
// -----------------------------------------------------------

/// Timed-out AllocMR ids remembered at most (their late answers are
/// released; older ones are forgotten and answered by the peer's cleanup
/// when the connection closes).
constexpr size_t max_late_allocs = 1024;

caf::typed_response_promise<remote_mr>
request_remote_mr(self_ptr self, uint64_t size, uint64_t align) {
  auto rp = self->make_response_promise<remote_mr>();
  auto id = new_request_id(self);
  send_request(
      self, pb::make_alloc_mr(id, size, align), local_mr{},
      [self, rp, id](const pb::Response* res, const caf::error& err) mutable {
        if (err) {
          auto& late = self->state.late_allocs;
          if (code_of(err) == errc::request_timeout) {
            late.push_back(id);
            if (late.size() > max_late_allocs)
              late.pop_front();
          }
          rp.deliver(err);
          return;
        }
        if (auto e = check_response(*res, pb::Response::kAllocMr, "AllocMR")) {
          rp.deliver(e);
          return;
        }
        auto token = to_token(res->alloc_mr().token());
        auto st = std::make_shared<remote_mr_state>(
            token, caf::actor_cast<caf::actor_addr>(self));
        rp.deliver(remote_mr{std::move(st)});
      });
  return rp;
}

caf::typed_response_promise<mr_token> send_local_mr(self_ptr self,
                                                    local_mr mr) {
  auto rp = self->make_response_promise<mr_token>();
  auto& st = self->state;
  if (!mr.valid()) {
    rp.deliver(make_error(errc::invalid_argument, "empty local_mr"));
    return rp;
  }
  auto token = mr.token();
  if (st.owned.count(token) != 0) {
    rp.deliver(make_error(errc::already_sent,
                          "this memory region was already sent to the peer "
                          "and not released yet"));
    return rp;
  }
  st.owned.emplace(token, owned_mr{mr, false});
  auto id = new_request_id(self);
  send_request(self, pb::make_send_mr(id, pb::SendMR::LOCAL, to_pb(token)),
               local_mr{},
               [self, rp, token](const pb::Response* res,
                                 const caf::error& err) mutable {
                 auto e = err ? err
                              : check_response(*res, pb::Response::kSendMr,
                                               "SendMR LOCAL");
                 if (!e) {
                   rp.deliver(token);
                   return;
                 }
                 // Not lent: unless the connection is going (then shut_down
                 // holds the memory until the queue pair is closed).
                 if (!self->state.down)
                   self->state.owned.erase(token);
                 rp.deliver(e);
               });
  return rp;
}

caf::typed_response_promise<mr_token> send_remote_mr(self_ptr self,
                                                     remote_mr mr) {
  auto rp = self->make_response_promise<mr_token>();
  if (!mr.valid() || mr.state()->agent() != self->address()) {
    rp.deliver(make_error(errc::invalid_argument,
                          "this remote_mr belongs to another connection"));
    return rp;
  }
  if (!mr.whole()) {
    rp.deliver(make_error(errc::invalid_argument,
                          "send the whole remote_mr back, not a slice"));
    return rp;
  }
  if (!mr.state()->take()) {
    rp.deliver(make_error(errc::already_sent,
                          "this remote_mr was already released or sent"));
    return rp;
  }
  auto token = mr.token();
  auto id = new_request_id(self);
  send_request(
      self, pb::make_send_mr(id, pb::SendMR::REMOTE, to_pb(token)), local_mr{},
      [rp, token](const pb::Response* res, const caf::error& err) mutable {
        auto e = err ? err
                     : check_response(*res, pb::Response::kSendMr,
                                      "SendMR REMOTE");
        if (e)
          rp.deliver(e);
        else
          rp.deliver(token);
      });
  return rp;
}

caf::typed_response_promise<uint64_t> release(self_ptr self, mr_token token,
                                              bool answer) {
  auto rp = self->make_response_promise<uint64_t>();
  auto id = new_request_id(self);
  send_request(self, pb::make_release_mr(id, to_pb(token)), local_mr{},
               [self, rp, token, answer](const pb::Response* res,
                                         const caf::error& err) mutable {
                 caf::error e = err;
                 if (!e)
                   e = check_response(*res, pb::Response::kReleaseMr,
                                      "ReleaseMR");
                 if (e && !answer && code_of(e) != errc::peer_gone)
                   log().warn("agent {}: ReleaseMR failed: {}",
                              self->state.link.peer, render(e));
                 if (!answer)
                   return;
                 if (e)
                   rp.deliver(e);
                 else
                   rp.deliver(token.len);
               });
  return rp;
}

/// Issues the next chunks of `job` while fewer than its window are in
/// flight.  Each chunk's request timer starts when the chunk is issued, so
/// a long transfer never times out for chunks that merely waited here.
void pump(self_ptr self, const std::shared_ptr<send_data_job>& job) {
  while (!job->failed && job->outstanding < job->window
         && (job->offset < job->mr.size() || job->chunks == 0)) {
    auto len = std::min(job->chunk_max, job->mr.size() - job->offset);
    auto chunk = job->mr.slice(job->offset, len);
    job->offset += len;
    ++job->chunks;
    ++job->outstanding;
    auto id = new_request_id(self);
    send_request(
        self, pb::make_send_data(id, len), std::move(*chunk),
        [self, job, len](const pb::Response* res, const caf::error& err) {
          --job->outstanding;
          if (job->failed)
            return;
          caf::error e = err;
          if (!e)
            e = check_response(*res, pb::Response::kSendData, "SendData");
          if (e) {
            job->failed = true;
            job->rp.deliver(e);
            return;
          }
          job->bytes += len;
          if (job->outstanding == 0 && job->offset >= job->mr.size()) {
            job->rp.deliver(job->bytes);
            return;
          }
          pump(self, job);
        });
  }
}

caf::typed_response_promise<uint64_t> send_data(self_ptr self, local_mr mr) {
  auto rp = self->make_response_promise<uint64_t>();
  auto& st = self->state;
  if (!mr.valid()) {
    rp.deliver(
        make_error(errc::invalid_argument, "send_data needs a valid local_mr"));
    return rp;
  }
  auto job = std::make_shared<send_data_job>();
  job->rp = rp;
  job->mr = std::move(mr);
  job->chunk_max
      = size_t{st.link.max_message_len_bytes} - pb::max_frame_overhead;
  // Half the peer's receive pool: enough to keep the link busy, while the
  // other half stays free for other requests and their answers.
  job->window = std::max<size_t>(1, st.link.recv_depth / 2);
  pump(self, job);
  return rp;
}

/// Sets (or, with an invalid handle, ends) the data subscription; hands
/// the queued chunks over first.  Returns how many.
uint64_t subscribe_data(self_ptr self, data_subscriber sub) {
  auto& st = self->state;
  if (st.subscriber)
    self->demonitor(st.subscriber.address());
  st.subscriber = std::move(sub);
  if (!st.subscriber)
    return 0;
  self->monitor(st.subscriber);
  auto queued = std::move(st.data.items);
  fail_all(st.data, make_error(errc::invalid_argument,
                               "a data subscriber took over the data of "
                               "this connection (subscribe_data)"));
  for (auto& chunk : queued)
    self->send(st.subscriber, data_atom::value, std::move(chunk));
  return queued.size();
}

agent_actor::behavior_type agent_impl(self_ptr self, transport_actor transport,
                                      link_params link, memory_pool_ptr pool,
                                      options opts) {
  auto& st = self->state;
  st.transport = std::move(transport);
  st.link = std::move(link);
  st.pool = std::move(pool);
  st.opts = std::move(opts);
  self->link_to(st.transport);
  self->set_exit_handler([self](caf::exit_msg& msg) {
    shut_down(self, msg.reason ? msg.reason
                               : make_error(errc::closed, "agent closed"));
  });
  // The only actor the agent monitors is its data subscriber.
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& st = self->state;
    if (st.subscriber && msg.source == st.subscriber.address())
      st.subscriber = data_subscriber{};
  });
  transport::transport_subscriber sub = self;
  self->request(st.transport, request_timeout(self),
                transport::subscribe_atom::value, sub)
      .then([](transport::link_params&) {},
            [self](caf::error& err) { shut_down(self, err); });
  send_unsolicited(self, pb::make_hello(pb::protocol_version,
                                        st.link.max_message_len_bytes,
                                        st.link.recv_depth));
  return {
      [self](request_remote_mr_atom, uint64_t size, uint64_t align) {
        return request_remote_mr(self, size, align);
      },
      [self](send_mr_atom, local_mr& mr) { return send_local_mr(self, mr); },
      [self](send_mr_atom, remote_mr& mr) { return send_remote_mr(self, mr); },
      [self](receive_local_mr_atom) {
        return take(self, self->state.local_mrs);
      },
      [self](receive_remote_mr_atom) {
        return take(self, self->state.remote_mrs);
      },
      [self](send_data_atom, local_mr& mr) { return send_data(self, mr); },
      [self](receive_data_atom) -> caf::result<local_mr> {
        if (self->state.subscriber)
          return make_error(errc::invalid_argument,
                            "the data of this connection goes to a "
                            "subscriber (subscribe_data); unsubscribe with "
                            "an invalid handle to call receive_data");
        return take(self, self->state.data);
      },
      [self](subscribe_data_atom, data_subscriber& sub) {
        return subscribe_data(self, std::move(sub));
      },
      [self](release_atom, remote_mr& mr) -> caf::result<uint64_t> {
        if (!mr.valid() || mr.state()->agent() != self->address())
          return make_error(errc::invalid_argument,
                            "this remote_mr belongs to another connection");
        if (!mr.state()->take())
          return make_error(errc::already_sent,
                            "this remote_mr was already released or sent");
        return release(self, mr.state()->token(), true);
      },
      [self](stats_atom) {
        auto& st = self->state;
        auto s = st.counters;
        s.owned_mrs = st.owned.size();
        s.pending_requests = st.pending.size();
        s.queued_data = st.data.items.size();
        s.queued_local_mrs = st.local_mrs.items.size();
        s.queued_remote_mrs = st.remote_mrs.items.size();
        s.peer_alloc_bytes = st.peer_alloc_bytes;
        s.queued_data_bytes = st.data.queued_bytes;
        return s;
      },
      [self](release_atom, mr_token token) {
        if (!self->state.down)
          release(self, token, false);
      },
      [self](timeout_atom) { sweep(self); },
      [self](transport::recv_atom, local_mr& buf) { on_message(self, buf); },
      [self](transport::qp_down_atom, caf::error& err) {
        shut_down(self, err);
      },
  };
}

} // namespace

agent_actor spawn_agent(caf::actor_system& sys, transport_actor transport,
                        link_params link, memory_pool_ptr pool,
                        const options& opts) {
  return sys.spawn(agent_impl, std::move(transport), std::move(link),
                   std::move(pool), opts);
}

} // namespace rdmactor
