// The agent's protocol core: lifecycle, requests to the peer (their ids and
// deadlines live in actors/request_table.hpp) and the operations users
// start.  The responder (frames from the peer) is in
// agent_core_responder.cpp.

#include "actors/agent_core.hpp"

#include <algorithm>
#include <cstring>
#include <random>

#include "common/logging.hpp"
#include "common/tuning.hpp"

namespace rdmactor {

namespace pb = protocol;

agent_core::agent_core(sink& out, options opts, transport::link_params link,
                       memory_pool_ptr pool)
    : out_(out), opts_(std::move(opts)), link_(std::move(link)),
      pool_(std::move(pool)),
      held_(opts_.peer_max_mrs, opts_.peer_max_alloc_bytes), guard_(opts_),
      requests_(opts_.peer_max_pending_requests),
      live_(std::chrono::milliseconds{opts_.keepalive_ms},
            liveness::staggered(std::chrono::milliseconds{opts_.keepalive_ms},
                                std::random_device{}())) {}

agent_core::~agent_core() = default;

agent_stats agent_core::stats() const {
  auto s = counters_;
  s.owned_mrs = held_.size();
  s.pending_requests = requests_.size();
  s.peer_alloc_bytes = held_.peer_bytes();
  s.rendezvous_bytes = inbound_.bytes() + actor_inbound_.bytes();
  s.partial_actor_bytes = out_.partial_actor().bytes;
  return s;
}

// -- lifecycle ----------------------------------------------------------------

void agent_core::start() {
  auto hello = pb::make_hello(pb::protocol_version, link_.max_message_len_bytes,
                              link_.recv_depth, /*cumulative_acks=*/true,
                              our_extensions());
  if (offers_rendezvous())
    hello.mutable_hello()->set_max_rendezvous_bytes(
        opts_.max_message_len_bytes);
  // We take Goodbye and answer Ping (whatever our own keepalive-ms).
  hello.mutable_hello()->set_goodbye(true);
  hello.mutable_hello()->set_keepalive(true);
  if (opts_.remote_actors) {
    hello.mutable_hello()->set_actor_window_messages(
        opts_.actor_window_messages);
    hello.mutable_hello()->set_actor_window_bytes(opts_.actor_window_bytes);
  }
  send_unsolicited(hello);
}

void agent_core::close(const caf::error& err) {
  if (closed_)
    return;
  closed_ = true;
  requests_.fail_all(err);
  hello_waiters_.fail_all(err);
  // Rendezvous chunks and actor messages being read or waiting behind
  // one: never delivered (a READ in flight keeps its memory alive in the
  // transport until it completes or the queue pair is gone).
  inbound_.clear();
  actor_inbound_.clear();
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
  return held_.take_all();
}

// -- requests -----------------------------------------------------------------

uint64_t agent_core::new_request_id() {
  return requests_.new_id();
}

/// Encodes `msg` into a header buffer for the transport.
caf::expected<std::vector<uint8_t>> agent_core::encode(const pb::Message& msg) {
  std::vector<uint8_t> buf(pb::frame_header_len + msg.ByteSizeLong());
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
  return std::min({expire_leases(now), expire_partials(now),
                   requests_.next_deadline(), hello_waiters_.next_deadline()});
}

caf::error agent_core::status_error(const pb::Response& res, const char* what) {
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

/// Another kind is `malformed_message`, a refusal carries the peer's code.
caf::error agent_core::check_response(const pb::Response& res,
                                      pb::Response::BodyCase expected,
                                      const char* what) {
  if (res.body_case() != expected)
    return make_error(errc::malformed_message,
                      std::string{"the peer answered "} + what
                          + " with a response of another kind");
  if (pb::status_of(res) != pb::OK)
    return status_error(res, what);
  return {};
}

// -- operations users start ---------------------------------------------------

void agent_core::alloc_remote(
    uint64_t size, uint64_t align, time_point now,
    std::function<void(caf::expected<mr_token>)> done) {
  alloc_remote_leased(
      size, align, now,
      [done = std::move(done)](caf::expected<mr_token> x, uint32_t) {
        done(std::move(x));
      });
}

void agent_core::alloc_remote_leased(
    uint64_t size, uint64_t align, time_point now,
    std::function<void(caf::expected<mr_token>, uint32_t)> done) {
  auto id = new_request_id();
  send_request(
      pb::make_alloc_mr(id, size, align), local_mr{},
      [this, id, done = std::move(done)](const pb::Response* res,
                                         const caf::error& err) {
        if (err) {
          if (code_of(err) == errc::request_timeout)
            requests_.remember_late_alloc(id);
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

void agent_core::lend(local_mr mr, time_point now,
                      std::function<void(caf::expected<mr_token>)> done,
                      uint64_t tag, uint32_t lease_ms) {
  now_ = now;
  if (!mr.valid()) {
    done(make_error(errc::invalid_argument, "empty local_mr"));
    return;
  }
  if (tag == 0 && lease_ms == 0) {
    lend_now(std::move(mr), 0, 0, std::move(done));
    return;
  }
  uint32_t needs = (tag != 0 ? uint32_t{pb::EXT_MR_TAGS} : 0u)
                   | (lease_ms != 0 ? uint32_t{pb::EXT_LEASES} : 0u);
  when_offered(
      needs, lease_ms != 0 ? "send_mr with a lease" : "send_mr with a tag", now,
      [this, mr, tag, lease_ms, done](const caf::error& err) mutable {
        if (err)
          done(err);
        else
          lend_now(std::move(mr), tag, lease_ms, std::move(done));
      });
}

/// SendMR LOCAL of `mr` with `tag` (the peer takes tags, or tag is 0).
void agent_core::lend_now(local_mr mr, uint64_t tag, uint32_t lease_ms,
                          std::function<void(caf::expected<mr_token>)> done) {
  auto now = now_;
  auto held = held_.hold(std::move(mr), false, lease_ms, now, *pool_);
  if (!held) {
    done(std::move(held.error()));
    return;
  }
  if (lease_ms != 0)
    out_.schedule_sweep();
  auto token = *held;
  auto id = new_request_id();
  send_request(
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
        if (!closed_)
          held_.release(token);
        done(e);
      },
      now);
}

void agent_core::give_back(const mr_token& token, time_point now,
                           std::function<void(const caf::error&)> done,
                           uint64_t tag) {
  now_ = now;
  if (tag == 0) {
    give_back_now(token, 0, std::move(done));
    return;
  }
  when_offered(pb::EXT_MR_TAGS, "send_mr with a tag", now,
               [this, token, tag, done](const caf::error& err) mutable {
                 if (err)
                   done(err);
                 else
                   give_back_now(token, tag, std::move(done));
               });
}

/// SendMR REMOTE of `token` with `tag` (the peer takes tags, or tag is 0).
void agent_core::give_back_now(const mr_token& token, uint64_t tag,
                               std::function<void(const caf::error&)> done) {
  auto now = now_;
  auto id = new_request_id();
  send_request(
      pb::make_send_mr(id, pb::SendMR::REMOTE, pb::make_token(token), tag),
      local_mr{},
      [done = std::move(done)](const pb::Response* res, const caf::error& err) {
        done(
            err ? err
                : check_response(*res, pb::Response::kSendMr, "SendMR REMOTE"));
      },
      now);
}

void agent_core::release_remote(const mr_token& token, time_point now,
                                std::function<void(const caf::error&)> done) {
  auto id = new_request_id();
  send_request(
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
        if (auto v = may_log(spdlog::level::warn))
          log().warn("agent {}: ReleaseMR failed: {}{}", link_.peer, render(e),
                     suppressed_note(v.denied_before));
      },
      now);
}

void agent_core::send_data(local_mr mr, time_point now,
                           std::function<void(caf::expected<uint64_t>)> done,
                           std::optional<uint32_t> imm) {
  if (!mr.valid()) {
    done(
        make_error(errc::invalid_argument, "send_data needs a valid local_mr"));
    return;
  }
  now_ = now;
  auto chunk_max = size_t{link_.max_message_len_bytes} - pb::max_frame_overhead;
  if (imm)
    chunk_max -= pb::imm_frame_overhead;
  auto s = std::make_shared<send_data_stream>(
      std::move(mr), chunk_max, tuning::send_data_window(link_.recv_depth), imm,
      std::move(done));
  if (!imm) {
    pump(s);
    return;
  }
  when_offered(pb::EXT_IMMEDIATE_DATA, "send_data with an immediate value", now,
               [this, s](const caf::error& err) {
                 if (err)
                   s->fail(err);
                 else
                   pump(s);
               });
}

/// Issues the next chunks of `s` while its window allows.  Each chunk's
/// request timer starts when the chunk is issued, so a long transfer never
/// times out for chunks that merely waited here.
void agent_core::pump(const std::shared_ptr<send_data_stream>& s) {
  while (s->wants_chunk()) {
    // Over the eager size to a peer that reads: by rendezvous.
    if (s->left() > s->chunk_max() && rendezvous_to_peer()) {
      if (!issue_rendezvous_chunk(s))
        return;
      continue;
    }
    auto chunk = s->next_eager();
    auto len = chunk.size();
    auto done = chunk_answer(s, len);
    if (!admit_request(done))
      continue; // failed the stream
    // The data path's frame, encoded by hand (pb::encode_send_data: the
    // bytes a Message would give, without building one).
    pb::send_data_fields f;
    f.request_id = new_request_id();
    f.len = len;
    f.imm = s->imm();
    f.acked = acks_.ids().data();
    f.acked_count = acks_that_fit(s->chunk_max() - len);
    std::vector<uint8_t> header(pb::max_send_data_header_len(f.acked_count));
    auto n = pb::encode_send_data(f, header.data(), header.size(),
                                  link_.max_message_len_bytes);
    if (n == 0) {
      // Cannot happen (chunk_max leaves room for the frame): failed like
      // an encoding error of send_request.
      done(nullptr, make_error(errc::frame_too_large,
                               "cannot encode SendData: the frame exceeds "
                               "max-message-len-bytes"));
      continue;
    }
    header.resize(n);
    acks_attached(f.acked_count);
    post_request(f.request_id, std::move(header), std::move(chunk),
                 std::move(done));
  }
}

/// The completion of one chunk of `s` (`len` bytes): the stream counts it
/// and ends with the first error or the last acknowledgement; more chunks
/// go otherwise.
agent_core::completion_fn
agent_core::chunk_answer(const std::shared_ptr<send_data_stream>& s,
                         size_t len) {
  return [this, s, len](const pb::Response* res, const caf::error& err) {
    caf::error e = err;
    if (!e && !s->ended())
      e = check_response(*res, pb::Response::kSendData, "SendData");
    if (s->answered(len, e))
      pump(s);
  };
}

} // namespace rdmactor
