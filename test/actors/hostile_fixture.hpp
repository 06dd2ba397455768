#pragma once

// A raw peer speaks to a node's agent through a bare transport actor and
// sends what a buggy or hostile peer would.  Every case must end in a
// documented error answer (or a counted drop) and the agent keeps serving.
// The fixture and options the suites of hostile_test share.

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/remote/actor_codec.hpp"
#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "test/actors/fixture.hpp"
#include "test/actors/raw_forwarder.hpp"

namespace rdmactor::test {

namespace pb = rdmactor::protocol;

inline options limited_options() {
  auto o = test_options();
  o.peer_max_mrs = 8;
  o.peer_max_queued_bytes = 64 * 1024;
  o.peer_max_pending_requests = 3;
  o.peer_max_violations = 6;
  o.request_timeout_ms = 1000;
  return o;
}

struct raw_peer_fixture : system_holder {
  options opts;
  std::unique_ptr<node> server;
  caf::scoped_actor inbox{sys};
  caf::scoped_actor acceptor{sys};
  connection_actor server_conn;
  transport::device_ptr dev;
  memory_pool_ptr pool;
  transport::transport_actor tr;
  uint64_t next_id = 1000;

  explicit raw_peer_fixture(options o = limited_options()) : opts(o) {
    auto s = node::open(sys, opts);
    BOOST_REQUIRE(s);
    server = std::move(*s);
    auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
    auto port
        = server->listen(host + ":0", caf::actor_cast<caf::actor>(acceptor));
    BOOST_REQUIRE(port);
    auto d = transport::open_device(opts);
    BOOST_REQUIRE(d);
    dev = *d;
    pool = std::make_shared<memory_pool>(dev, 1 << 20, 1 << 24);
    auto qp = dev->connect(host, *port,
                           {opts.max_message_len_bytes, opts.recv_depth},
                           std::chrono::milliseconds(3000));
    BOOST_REQUIRE_MESSAGE(qp, render(qp));
    tr = transport::spawn_transport(sys, dev, std::move(*qp));
    auto fwd = sys.spawn(raw_forwarder, caf::actor_cast<caf::actor>(inbox));
    auto linked = call<transport::link_params>(
        sys, tr, transport::subscribe_atom::value, fwd);
    BOOST_REQUIRE(linked);
    acceptor->receive(
        [&](accepted_atom, connection_actor& c) { server_conn = c; });
  }

  ~raw_peer_fixture() {
    caf::anon_send_exit(tr, caf::exit_reason::user_shutdown);
    server->close();
  }

  /// Sends raw header bytes followed by `payload` bytes.
  void send_raw(std::vector<uint8_t> header, size_t payload_len = 0) {
    local_mr payload;
    if (payload_len > 0) {
      auto mr = pool->allocate(payload_len, 8, transport::access::local_write);
      BOOST_REQUIRE(mr);
      payload = *mr;
    }
    auto n = call<uint64_t>(sys, tr, transport::send_atom::value,
                            std::move(header), payload);
    BOOST_REQUIRE_MESSAGE(n, render(n));
  }

  void send(const pb::Message& msg, size_t payload_len = 0) {
    std::vector<uint8_t> buf(pb::frame_header_len + msg.ByteSizeLong());
    auto res
        = pb::encode(msg, buf.data(), buf.size(), opts.max_message_len_bytes);
    BOOST_REQUIRE(res.code == errc::none);
    buf.resize(res.header_len);
    send_raw(std::move(buf), payload_len);
  }

  /// Takes the agent's frames, each decoded with its payload, until
  /// `take(msg, payload, len)` returns true.
  template <class Take>
  void take_frames(Take take, const char* what) {
    for (bool done = false; !done;)
      inbox->receive(
          [&](transport::recv_atom, local_mr& mr) {
            pb::Message msg;
            auto r = pb::decode(mr.data(), mr.size(),
                                opts.max_message_len_bytes, msg);
            BOOST_REQUIRE(r.code == errc::none);
            done = take(msg, r.payload, r.payload_len);
          },
          caf::after(std::chrono::seconds(5)) >>
              [&] { BOOST_FAIL("no " << what << " from the agent"); });
  }

  /// Waits for the next message from the agent for which `wanted` holds
  /// (others are skipped).
  template <class Pred>
  pb::Message next_message(Pred wanted, const char* what) {
    pb::Message out;
    take_frames(
        [&](pb::Message& msg, const uint8_t*, size_t) {
          if (!wanted(msg))
            return false;
          out = std::move(msg);
          return true;
        },
        what);
    return out;
  }

  /// Waits for the next message from the agent that is a response.
  pb::Response next_response() {
    return next_message([](const pb::Message& m) { return m.has_response(); },
                        "answer")
        .response();
  }

  /// Waits for the next message from the agent that is a request.
  pb::Request next_request() {
    return next_message([](const pb::Message& m) { return m.has_request(); },
                        "request")
        .request();
  }

  agent_stats server_stats() {
    auto s = call<agent_stats>(sys, server_conn, stats_atom::value);
    BOOST_REQUIRE(s);
    return *s;
  }

  /// Checks the agent still serves: a valid AllocMR gets an OK answer.
  void expect_still_serving() {
    auto id = next_id++;
    send(pb::make_alloc_mr(id, 128, 8));
    // Answers to earlier requests (Pongs of a slow run) may come first.
    auto res = next_message(
                   [id](const pb::Message& m) {
                     return m.has_response() && m.response().request_id() == id;
                   },
                   "answer to AllocMR")
                   .response();
    BOOST_TEST(res.request_id() == id);
    BOOST_TEST(pb::status_of(res) == pb::OK);
    BOOST_TEST(res.alloc_mr().token().len() == 128u);
  }

  /// Looks `name` up as the peer; returns the actor id the agent answers
  /// (0: nothing published under it).
  uint64_t lookup_as_peer(const std::string& name) {
    pb::Message lookup;
    lookup.mutable_request()->set_request_id(next_id++);
    lookup.mutable_request()->mutable_actor_lookup()->set_name(name);
    send(lookup);
    auto res = next_response();
    BOOST_REQUIRE(res.has_actor_lookup());
    return res.actor_lookup().actor_id();
  }

  /// Sends an ActorMessage to `target` whose payload, `bytes`, follows the
  /// header in the same frame: asynchronous and anonymous by default, a
  /// request with `sender` and `mid`, a down notice with `down`.
  template <class Bytes>
  void send_actor_message(uint64_t target, const Bytes& bytes,
                          uint64_t sender = 0, uint64_t mid = 0,
                          bool down = false) {
    pb::Message m;
    auto* a = m.mutable_actor_message();
    a->set_target(target);
    a->set_sender(sender);
    a->set_message_id(mid);
    a->set_down(down);
    a->set_len(bytes.size());
    std::vector<uint8_t> buf(pb::frame_header_len + m.ByteSizeLong());
    auto enc
        = pb::encode(m, buf.data(), buf.size(), opts.max_message_len_bytes);
    BOOST_REQUIRE(enc.code == errc::none);
    buf.resize(enc.header_len);
    // The payload follows from registered memory (a send's header is
    // short: max_send_header_bytes).
    local_mr payload;
    if (!bytes.empty()) {
      auto mr = pool->allocate(bytes.size(), 8, transport::access::local_write);
      BOOST_REQUIRE(mr);
      std::memcpy(mr->data(), bytes.data(), bytes.size());
      payload = *mr;
    }
    auto n = call<uint64_t>(sys, tr, transport::send_atom::value,
                            std::move(buf), payload);
    BOOST_REQUIRE_MESSAGE(n, render(n));
  }

  /// Waits for the next ActorMessage from the agent (others are skipped);
  /// returns its header and its payload, deserialized.
  std::pair<pb::ActorMessage, caf::message> next_actor_message() {
    std::pair<pb::ActorMessage, caf::message> out;
    take_frames(
        [&](pb::Message& msg, const uint8_t* payload, size_t len) {
          if (!msg.has_actor_message())
            return false;
          auto m = deserialize_message(sys, payload, len);
          BOOST_REQUIRE_MESSAGE(m, render(m));
          out = {msg.actor_message(), std::move(*m)};
          return true;
        },
        "actor message");
    return out;
  }

  /// Says hello with remote actors and looks `name` up as the peer.
  uint64_t reach(const std::string& name) {
    send(pb::make_hello(pb::protocol_version, opts.max_message_len_bytes,
                        opts.recv_depth, true, pb::EXT_REMOTE_ACTORS));
    auto target = lookup_as_peer(name);
    BOOST_REQUIRE(target != 0u);
    return target;
  }

  /// Waits for the error that answers the raw peer's request (its actor
  /// 7) and checks it: `code`, a text that holds `why`, and the server's
  /// count of protocol violations reaching `violations`.
  void expect_refusal(errc code, const std::string& why, uint64_t violations) {
    auto err = next_error_answer();
    BOOST_TEST(code_of(err) == code, render(err));
    BOOST_TEST(what_of(err).find(why) != std::string::npos, render(err));
    BOOST_TEST(eventually(
        [&] { return server_stats().protocol_errors == violations; }));
  }

  /// Waits for the error that answers the raw peer's request (its actor 7).
  caf::error next_error_answer() {
    auto answer = next_actor_message();
    BOOST_TEST(answer.first.target() == 7u);
    BOOST_TEST(caf::message_id{answer.first.message_id()}.is_response());
    BOOST_REQUIRE_MESSAGE(answer.second.match_elements<caf::error>(),
                          to_string(answer.second));
    return answer.second.get_as<caf::error>(0);
  }
};

} // namespace rdmactor::test
