// The agent's protocol core: lifecycle, and requests to the peer (their
// ids and deadlines live in actors/core/request_table.hpp).  The responder
// (frames from the peer) is in agent_core_responder.cpp; the operations
// users start are the components' (data_channel, mr_exchange,
// actor_channel, liveness_channel).

#include "actors/core/agent_core.hpp"

#include <algorithm>
#include <cstring>

#include "common/logging.hpp"
#include "common/random.hpp"
#include "common/tuning.hpp"

namespace rdmactor {

namespace pb = protocol;

agent_core::agent_core(sink& out, options opts, transport::link_params link,
                       memory_pool_ptr pool)
    : out_(out), opts_(std::move(opts)), link_(std::move(link)),
      pool_(std::move(pool)), guard_(opts_),
      requests_(opts_.peer_max_pending_requests), live_(*this, random_u64()) {}

agent_core::~agent_core() = default;

// -- core_port's services -----------------------------------------------------

const options& agent_core::opts() const noexcept {
  return opts_;
}

const transport::link_params& agent_core::link() const noexcept {
  return link_;
}

const memory_pool_ptr& agent_core::pool() const noexcept {
  return pool_;
}

bool agent_core::closed() const noexcept {
  return closed_;
}

caf::error agent_core::peer_gone_error() const {
  return make_error(errc::peer_gone, "the peer " + link_.peer + " is gone");
}

bool agent_core::peer_offers(uint32_t extension) const noexcept {
  return hello_seen_ && (peer_extensions_ & extension) != 0;
}

std::chrono::milliseconds agent_core::request_timeout() const noexcept {
  return std::chrono::milliseconds{opts_.request_timeout_ms};
}

agent_core::time_point agent_core::now() const noexcept {
  return now_;
}

void agent_core::set_now(time_point now) noexcept {
  now_ = now;
}

agent_sink& agent_core::out() noexcept {
  return out_;
}

agent_stats& agent_core::counters() noexcept {
  return counters_;
}

bool agent_core::serving() const noexcept {
  return !closed_ && !disconnected_;
}

void agent_core::remember_late_alloc(uint64_t id) {
  requests_.remember_late_alloc(id);
}

void agent_core::send_unsolicited(const pb::Message& msg) {
  send_unsolicited(msg, false);
}

void agent_core::send_upkeep(const pb::Message& msg) {
  send_unsolicited(msg, true);
}

void agent_core::ack_send_data(uint64_t id) {
  data_.ack(id);
}

agent_stats agent_core::stats() const {
  auto s = counters_;
  s.owned_mrs = regions_.held().size();
  s.pending_requests = requests_.size();
  s.peer_alloc_bytes = regions_.held().peer_bytes();
  s.rendezvous_bytes = data_.held_bytes() + actors_.held_bytes();
  s.partial_actor_bytes = out_.partial_actor().bytes;
  return s;
}

// -- lifecycle ----------------------------------------------------------------

void agent_core::start() {
  auto hello = pb::make_hello(pb::protocol_version, link_.max_message_len_bytes,
                              link_.recv_depth, /*cumulative_acks=*/true,
                              our_extensions());
  if (offers_rendezvous())
    hello.mutable_hello()->set_max_rendezvous_bytes(opts_.max_rendezvous_bytes);
  // We take Goodbye and answer Ping (whatever our own keepalive-ms).
  hello.mutable_hello()->set_goodbye(true);
  hello.mutable_hello()->set_keepalive(true);
  hello.mutable_hello()->set_node(live_.node());
  if (opts_.remote_actors) {
    hello.mutable_hello()->set_actor_window_messages(
        opts_.actor_window_messages);
    hello.mutable_hello()->set_actor_window_bytes(opts_.actor_window_bytes);
  }
  // Upkeep, as the peer's Hello is when it arrives (`on_hello`): setting
  // a connection up starts no polling tail, so that thousands of
  // connections opened at once do not spin on their sockets (a poll of a
  // soft link is a recv).  The first traffic polls as usual.
  send_upkeep(hello);
}

void agent_core::close(const caf::error& err) {
  if (closed_)
    return;
  closed_ = true;
  live_.closing();
  requests_.fail_all(err);
  hello_waiters_.fail_all(err);
  // Rendezvous chunks and actor messages being read or waiting behind
  // one: never delivered (a READ in flight keeps its memory alive in the
  // transport until it completes or the queue pair is gone).
  data_.clear();
  actors_.clear();
  // The lines the peer's budget held back, in one summary line (through
  // the shared budget: a connection is cheap for a peer).
  if (auto n = guard_.take_denied_lines(); n > 0) {
    auto& shared = shared_log_budget("agent");
    if (auto v = shared.take(now_))
      log().warn("agent {}: {} lines about this peer were suppressed "
                 "(peer-max-log-lines){}",
                 link_.peer, n, suppressed_note(v.denied_before));
    else
      shared.add_denied(n);
  }
}

owned_regions agent_core::take_owned() {
  return regions_.take_all();
}

// -- requests -----------------------------------------------------------------

uint64_t agent_core::new_request_id() {
  return requests_.new_id();
}

/// Encodes `msg` into a header buffer for the transport.
caf::expected<std::vector<uint8_t>> agent_core::encode(const pb::Message& msg) {
  auto buf = out_.header_buffer();
  buf.resize(pb::frame_header_len + msg.ByteSizeLong());
  auto res
      = pb::encode(msg, buf.data(), buf.size(), link_.max_message_len_bytes);
  if (res.code != errc::none)
    return make_error(res.code, std::string{"cannot encode "}
                                    + pb::kind_name(msg) + ": "
                                    + describe(res.code));
  buf.resize(res.header_len);
  return buf;
}

/// Posts a frame: `header` (frame header + encoded Message) with `payload`
/// behind it.  A header larger than the transport's header slot
/// (max_send_header_bytes: e.g. a lookup answer that names a typed actor's
/// long interface, or a lookup of a long name) goes with its payload from
/// pool memory instead, as one payload-only send: the peer sees the same
/// bytes.  Errors: those of the pool (the frame is not sent).
caf::error agent_core::post_frame(std::vector<uint8_t> header,
                                  local_mr payload) {
  if (header.size() <= transport::max_send_header_bytes) {
    out_.post(std::move(header), std::move(payload));
    return {};
  }
  if (!pool_)
    return make_error(errc::internal_error,
                      "a frame of " + std::to_string(header.size())
                          + " header bytes needs a memory pool");
  auto mr = pool_->allocate(header.size() + payload.size(), 64,
                            transport::access::local_write, false);
  if (!mr)
    return mr.error();
  std::memcpy(mr->data(), header.data(), header.size());
  if (payload.size() > 0)
    std::memcpy(mr->data() + header.size(), payload.data(), payload.size());
  out_.post({}, std::move(*mr));
  return {};
}

/// Sends a response (or Hello) as a post: nothing waits for it; a send
/// that fails takes the connection down.  `upkeep`: a keepalive Ping or
/// Pong (`agent_sink::post_upkeep`).
void agent_core::send_unsolicited(const pb::Message& msg, bool upkeep) {
  auto buf = encode(msg);
  // Both lines can come once per connection (a Hello) or per request of
  // the peer: its budget and the shared one.
  if (!buf) {
    if (auto v = may_log(spdlog::level::err))
      log().error("agent {}: {}{}", link_.peer, render(buf.error()),
                  suppressed_note(v.denied_before));
    return;
  }
  if (upkeep && buf->size() <= transport::max_send_header_bytes) {
    out_.post_upkeep(std::move(*buf));
    return;
  }
  if (auto err = post_frame(std::move(*buf), local_mr{}))
    if (auto v = may_log(spdlog::level::err))
      log().error("agent {}: cannot send {}: {}{}", link_.peer,
                  pb::kind_name(msg), render(err),
                  suppressed_note(v.denied_before));
}

/// Whether a request may go out now; else fails `done` (closed, or too
/// many pending) and returns false.
bool agent_core::admit_request(completion_fn& done) {
  if (closed_) {
    done(nullptr, peer_gone_error());
    return false;
  }
  if (requests_.full()) {
    done(nullptr, make_error(errc::quota_exceeded,
                             std::to_string(requests_.size()) + " requests to "
                                 + link_.peer
                                 + " are waiting for answers (peer-max-pending-"
                                   "requests); wait for some to finish"));
    return false;
  }
  return true;
}

void agent_core::send_request(pb::Message msg, local_mr payload,
                              completion_fn done, time_point now) {
  now_ = now;
  if (!admit_request(done))
    return;
  auto id = msg.request().request_id();
  auto buf = encode(msg);
  if (!buf) {
    done(nullptr, buf.error());
    return;
  }
  post_request(id, std::move(*buf), std::move(payload), std::move(done));
}

/// Registers the admitted request `id` (its encoded frame `header`) as
/// pending and posts it with `payload` behind.
void agent_core::post_request(uint64_t id, std::vector<uint8_t> header,
                              local_mr payload, completion_fn done) {
  if (!requests_.add(id, std::move(done), now_ + request_timeout())) {
    // Cannot happen (admitted, with an id from new_request_id and nothing
    // between): failed like a post that failed.
    done(nullptr, make_error(errc::internal_error,
                             "request " + std::to_string(id) + " to "
                                 + link_.peer + " has no slot"));
    return;
  }
  out_.schedule_sweep();
  // The peer's response completes the request; a send that fails takes
  // the connection down, and `close` fails every pending request.  So the
  // transport need not answer the send itself (one message less per
  // request on the data path).
  if (auto err = post_frame(std::move(header), std::move(payload)))
    requests_.complete(id, nullptr, err);
}

agent_core::time_point agent_core::expire(time_point now) {
  now_ = now;
  requests_.expire(now,
                   make_error(errc::request_timeout,
                              "no answer from " + link_.peer + " within "
                                  + std::to_string(opts_.request_timeout_ms)
                                  + " ms (request-timeout-ms)"));
  hello_waiters_.expire(now, link_.peer, opts_.request_timeout_ms);
  return std::min({regions_.expire_leases(now), expire_partials(now),
                   requests_.next_deadline(), hello_waiters_.next_deadline()});
}

} // namespace rdmactor
