#define BOOST_TEST_MODULE hostile_peer
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <set>
#include <thread>

// A raw peer speaks to a node's agent through a bare transport actor and
// sends what a buggy or hostile peer would.  Every case must end in a
// documented error answer (or a counted drop) and the agent keeps serving.

#include <caf/typed_event_based_actor.hpp>

#include <caf/duration.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/sec.hpp>
#include <caf/skip.hpp>

#include "rdmactor/unexpected.hpp"

#include "actors/actor_codec.hpp"
#include "common/node_identity.hpp"
#include "common/tuning.hpp"
#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "test/actors/fixture.hpp"
#include "test/actors/nested_payload.hpp"

using namespace rdmactor;
using namespace rdmactor::test;
namespace pb = rdmactor::protocol;

namespace {

transport::transport_subscriber::behavior_type
forwarder(transport::transport_subscriber::pointer self, caf::actor dst) {
  return {
      [dst](transport::recv_atom a, local_mr& mr) {
        caf::anon_send(dst, a, mr);
      },
      [dst](transport::imm_arrived_atom a, uint32_t imm, uint32_t n) {
        caf::anon_send(dst, a, imm, n);
      },
      [dst](transport::qp_down_atom a, caf::error& e) {
        caf::anon_send(dst, a, e);
      },
  };
}

options limited_options() {
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
    auto fwd = sys.spawn(forwarder, caf::actor_cast<caf::actor>(inbox));
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

/// A request id as CAF writes one (what the raw peer's actor 7 sends).
constexpr uint64_t request_mid = 0x1000000000000001ull;

template <class T>
std::vector<char> bytes_of(caf::actor_system& sys, const T& x) {
  auto b = serialize_message(sys, caf::make_message(x));
  BOOST_REQUIRE_MESSAGE(b, render(b));
  return *b;
}

/// An untyped actor that adds one to an int32_t.
caf::behavior add_one(caf::event_based_actor*) {
  return {[](int32_t x) { return x + 1; }};
}

using add_atom = caf::atom_constant<caf::atom("add")>;
using adder = caf::typed_actor<
    caf::replies_to<add_atom, int32_t, int32_t>::with<int32_t>>;

} // namespace

BOOST_FIXTURE_TEST_SUITE(hostile, raw_peer_fixture)

// A message of config values nested 20,000 lists deep overflowed the
// stack inside CAF's deserializer, on every node, even as a down notice
// for any id.  Now a down notice for an actor we have no proxy of is not
// read at all, and a nest past the limit is refused before it loads.
BOOST_AUTO_TEST_CASE(deeply_nested_payloads_are_refused_never_a_crash) {
  auto svc = sys.spawn(add_one);
  BOOST_REQUIRE(server->publish("svc", svc));
  auto target = reach("svc");
  auto deep = nested_config_value_bytes(sys, 1500); // one 4 KiB frame
  auto before = server_stats().protocol_errors;
  send_actor_message(424242, deep, 0, 0, true); // a down notice: not read
  send_actor_message(target, deep, 7, request_mid);
  expect_refusal(errc::serialization_failed, "nested more than", before + 1);
  expect_still_serving();
  auto alive = call<int32_t>(sys, svc, int32_t{1});
  BOOST_REQUIRE_MESSAGE(alive, render(alive));
  BOOST_TEST(*alive == 2);
  caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
}

// A peer that forges a handle naming one of the receiver's own actors
// (here the raw peer shares the server's actor system, so it knows the
// node id, as a peer that learned it would) reaches none of them: the
// message is refused before anything is delivered.
BOOST_AUTO_TEST_CASE(a_forged_handle_of_the_receivers_actor_reaches_nothing) {
  auto touched = std::make_shared<std::atomic<int>>(0);
  auto hidden = sys.spawn([touched](caf::event_based_actor*) -> caf::behavior {
    return {[touched](int32_t) { ++*touched; }};
  });
  auto svc = sys.spawn([](caf::event_based_actor* self) -> caf::behavior {
    return {[=](handle_box& box) {
      self->send(box.hdl, int32_t{1});
      return int32_t{0};
    }};
  });
  BOOST_REQUIRE(server->publish("svc", svc));
  auto target = reach("svc");
  auto forged = serialize_message(sys, caf::make_message(handle_box{hidden}));
  BOOST_REQUIRE_MESSAGE(forged, render(forged));
  auto before = server_stats().protocol_errors;
  send_actor_message(target, *forged, 7, request_mid);
  expect_refusal(errc::serialization_failed, "names an actor of this node",
                 before + 1);
  expect_still_serving();
  BOOST_TEST(touched->load() == 0);
  caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(hidden, caf::exit_reason::user_shutdown);
}

// A peer's handles name the peer's own actors: the first node id it names
// is taken as its own, a handle of any other node is refused (a peer
// cannot make the receiver hold proxies of nodes it does not reach), and
// the connection keeps serving.
BOOST_AUTO_TEST_CASE(a_peers_handles_name_only_its_own_node) {
  auto svc = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](handle_box& box) { return int32_t{box.hdl ? 1 : 0}; }};
  });
  BOOST_REQUIRE(server->publish("svc", svc));
  auto target = reach("svc");
  auto any = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](int32_t) {}};
  });
  auto bytes = serialize_message(sys, caf::make_message(handle_box{any}));
  BOOST_REQUIRE_MESSAGE(bytes, render(bytes));
  auto secret = secret_of(sys);
  BOOST_REQUIRE(secret);
  // The handle, as a node whose host id is all `b` would write it.
  auto as_node = [&](uint8_t b) {
    auto v = *bytes;
    auto at = std::search(
        v.begin(), v.end(), secret->begin(), secret->end(),
        [](char a, uint8_t b) { return static_cast<uint8_t>(a) == b; });
    BOOST_REQUIRE(at != v.end());
    std::fill_n(at, secret->size(), static_cast<char>(b));
    return v;
  };
  auto before = server_stats().protocol_errors;
  send_actor_message(target, as_node(0x11), 7, request_mid);
  // The first becomes a proxy (the service sees a valid handle).
  auto first = next_actor_message();
  BOOST_REQUIRE_MESSAGE(first.second.match_elements<int32_t>(),
                        to_string(first.second));
  BOOST_TEST(first.second.get_as<int32_t>(0) == 1);
  send_actor_message(target, as_node(0x22), 7, request_mid + 1);
  expect_refusal(errc::serialization_failed, "which is not its own",
                 before + 1);
  expect_still_serving();
  caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(any, caf::exit_reason::user_shutdown);
}

// One asynchronous message that holds just a caf::error made published
// actors quit (CAF's default error handler), and every client with them.
BOOST_AUTO_TEST_CASE(a_lone_error_cannot_make_a_published_actor_quit) {
  auto svc = sys.spawn(add_one);
  BOOST_REQUIRE(server->publish("svc", svc));
  auto target = reach("svc");
  auto lone = bytes_of(sys, make_error(errc::peer_error, "quit, please"));
  auto before = server_stats().protocol_errors;
  send_actor_message(target, lone);                 // asynchronous
  send_actor_message(target, lone, 7, request_mid); // a request
  expect_refusal(errc::serialization_failed, "error handler", before + 2);
  auto alive = call<int32_t>(sys, svc, int32_t{41});
  BOOST_REQUIRE_MESSAGE(alive, render(alive));
  BOOST_TEST(*alive == 42);
  caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
}

// A message a typed actor does not take is refused at the receiving node
// (an answer for a request, a counted violation either way): it never
// reaches CAF's default handler, which printed each whole.  What the
// interface takes goes through.
BOOST_AUTO_TEST_CASE(a_message_outside_a_typed_interface_is_refused) {
  auto typed = sys.spawn([]() -> adder::behavior_type {
    return {[](add_atom, int32_t a, int32_t b) { return a + b; }};
  });
  BOOST_REQUIRE(server->publish("adder", typed)); // a typed handle as it is
  auto target = reach("adder");
  auto before = server_stats().protocol_errors;
  send_actor_message(target, bytes_of(sys, std::string(3000, 'x')));
  // The right types under another atom: not in the interface either.
  auto sub = serialize_message(
      sys, caf::make_message(caf::atom("sub"), int32_t{2}, int32_t{3}));
  BOOST_REQUIRE(sub);
  send_actor_message(target, *sub, 7, request_mid);
  expect_refusal(errc::unexpected_message, "('sub',@i32,@i32)", before + 2);
  auto good = serialize_message(
      sys, caf::make_message(add_atom::value, int32_t{2}, int32_t{3}));
  BOOST_REQUIRE(good);
  send_actor_message(target, *good, 7, request_mid + 1);
  auto answer = next_actor_message();
  BOOST_REQUIRE_MESSAGE(answer.second.match_elements<int32_t>(),
                        to_string(answer.second));
  BOOST_TEST(answer.second.get_as<int32_t>(0) == 5);
  BOOST_TEST(server_stats().protocol_errors == before + 2);
  caf::anon_send_exit(typed, caf::exit_reason::user_shutdown);
}

// An untyped actor with rdmactor's quiet default handler drops and counts
// what it does not handle (CAF's default printed 5,000 such messages,
// 14.9 MB, to stdout) and answers a request with unexpected_message.
BOOST_AUTO_TEST_CASE(drop_unexpected_counts_and_answers_what_nobody_handles) {
  auto svc = sys.spawn([](caf::event_based_actor* self) -> caf::behavior {
    self->set_default_handler(drop_unexpected);
    return {[](int32_t x) { return x + 1; }};
  });
  BOOST_REQUIRE(server->publish("svc", svc));
  auto target = reach("svc");
  auto before = unexpected_messages();
  auto text = bytes_of(sys, std::string(3000, 'x'));
  for (int i = 0; i < 20; ++i)
    send_actor_message(target, text);
  send_actor_message(target, text, 7, request_mid);
  auto err = next_error_answer();
  BOOST_TEST((err == caf::make_error(caf::sec::unexpected_message)),
             to_string(err));
  BOOST_TEST(unexpected_messages() == before + 21);
  auto alive = call<int32_t>(sys, svc, int32_t{1});
  BOOST_REQUIRE_MESSAGE(alive, render(alive));
  caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(release_of_an_unknown_token_is_an_error_answer) {
  auto id = next_id++;
  send(pb::make_release_mr(id, pb::make_token(0xdead000, 64, 77)));
  auto res = next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::UNKNOWN_TOKEN);
  BOOST_TEST(server_stats().rejected_requests == 1u);
  expect_still_serving();
}

BOOST_AUTO_TEST_CASE(send_mr_remote_of_a_token_not_owned_is_an_error_answer) {
  auto id = next_id++;
  send(pb::make_send_mr(id, pb::SendMR::REMOTE, pb::make_token(4096, 64, 1)));
  auto res = next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::NOT_OWNED);
  expect_still_serving();
}

BOOST_AUTO_TEST_CASE(absurd_layouts_are_error_answers) {
  struct layout_case {
    uint64_t size;
    uint64_t align;
    pb::Status status;
  };
  for (auto c : {layout_case{64, 0, pb::INVALID_LAYOUT},
                 layout_case{64, 3, pb::INVALID_LAYOUT},
                 layout_case{uint64_t{1} << 62, 8, pb::SIZE_LIMIT},
                 layout_case{~uint64_t{0}, 1, pb::SIZE_LIMIT}}) {
    auto id = next_id++;
    send(pb::make_alloc_mr(id, c.size, c.align));
    auto res = next_response();
    BOOST_TEST(res.request_id() == id);
    BOOST_TEST(pb::status_of(res) == c.status);
  }
  BOOST_TEST(server->memory_stats().bytes_in_use == 0u);
  expect_still_serving();
}

BOOST_AUTO_TEST_CASE(send_data_with_a_wrong_length_is_an_error_answer) {
  auto id = next_id++;
  send(pb::make_send_data(id, 100), 50); // says 100, carries 50
  auto res = next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::LENGTH_MISMATCH);
  BOOST_TEST(server_stats().queued_data == 0u);
  expect_still_serving();
}

BOOST_AUTO_TEST_CASE(garbage_frames_are_dropped_and_counted) {
  send_raw(std::vector<uint8_t>(64, 0xff));            // length over the max
  send_raw(std::vector<uint8_t>{3, 0, 0, 0, 1, 2, 3}); // not protobuf
  send_raw(std::vector<uint8_t>{1, 0});                // truncated header
  pb::Message unknown_response;
  unknown_response.mutable_response()->set_request_id(987654321);
  unknown_response.mutable_response()->mutable_send_data();
  send(unknown_response); // answers nothing we asked
  BOOST_TEST(eventually([&] { return server_stats().protocol_errors == 4; }));
  expect_still_serving();
}

// Remote actors (issue 14): a lookup of an unknown name is an answer, not
// an error; actor messages to actors nobody published and chunks that do
// not continue their message are counted violations; the agent serves on.
BOOST_AUTO_TEST_CASE(hostile_actor_frames_are_refused_and_counted) {
  pb::Message lookup;
  auto* req = lookup.mutable_request();
  req->set_request_id(next_id++);
  req->mutable_actor_lookup()->set_name("nobody");
  send(lookup);
  auto res = next_response();
  BOOST_TEST(res.request_id() == req->request_id());
  BOOST_REQUIRE(res.has_actor_lookup());
  BOOST_TEST(res.actor_lookup().status() == pb::OK);
  BOOST_TEST(res.actor_lookup().actor_id() == 0u);
  req->set_request_id(next_id++);
  req->mutable_actor_lookup()->set_name(""); // invalid: refused
  send(lookup);
  res = next_response();
  BOOST_TEST(res.actor_lookup().status() == pb::MALFORMED);
  auto actor_message = [](uint64_t target, uint64_t len, uint64_t total) {
    pb::Message m;
    auto* a = m.mutable_actor_message();
    a->set_target(target);
    a->set_sender(7);
    a->set_message_id(0x1000000000000001ull); // a request
    a->set_len(len);
    a->set_total_len(total);
    return m;
  };
  auto before = server_stats().protocol_errors;
  send(actor_message(12345, 16, 0), 16); // nobody published it
  send(actor_message(1, 10, 100), 10);   // first chunk of 100 bytes
  send(actor_message(2, 10, 0), 10);     // does not continue it
  BOOST_TEST(
      eventually([&] { return server_stats().protocol_errors == before + 2; }));
  expect_still_serving();
}

// Payloads that CAF would load and then crash on or spin on: a
// caf::duration of an unknown unit (printed, as CAF's default handler
// prints what an actor does not handle, it read out of bounds) and a
// double that decodes to an infinity (an actor that echoed it would spin
// in CAF's serializer).  Each is refused and counted; the agent, the
// published actor and the node go on.
BOOST_AUTO_TEST_CASE(actor_payloads_that_caf_cannot_handle_are_refused) {
  auto echo = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](int32_t x) { return x; }};
  });
  BOOST_REQUIRE(server->publish("echo", echo));
  send(pb::make_hello(pb::protocol_version, opts.max_message_len_bytes,
                      opts.recv_depth, true, pb::EXT_REMOTE_ACTORS));
  auto target = lookup_as_peer("echo");
  BOOST_REQUIRE(target != 0u);
  auto poisoned
      = [&](const caf::message& msg, size_t at, uint8_t from, uint8_t to) {
          auto bytes = serialize_message(sys, msg);
          BOOST_REQUIRE(bytes);
          // The value's bytes end the payload; `at` counts from the end.
          auto& b = *bytes;
          BOOST_REQUIRE(b.size() > at);
          BOOST_REQUIRE(static_cast<uint8_t>(b[b.size() - at]) == from);
          b[b.size() - at] = static_cast<char>(to);
          return b;
        };
  auto before = server_stats().protocol_errors;
  // Unit seconds (2) becomes 64: u32 unit (big-endian), then u64 count.
  send_actor_message(
      target,
      poisoned(caf::make_message(caf::duration{caf::time_unit::seconds, 5}), 9,
               2, 64));
  // 1.0 (0x3ff0...) becomes 0x7ff0...: the largest exponent, an infinity.
  send_actor_message(target, poisoned(caf::make_message(1.0), 8, 0x3f, 0x7f));
  BOOST_TEST(
      eventually([&] { return server_stats().protocol_errors == before + 2; }));
  expect_still_serving();
  auto alive = call<int32_t>(sys, caf::actor_cast<caf::actor>(echo), 5);
  BOOST_REQUIRE_MESSAGE(alive, render(alive));
  BOOST_TEST(*alive == 5);
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(hostile_actor_acks_are_violations_never_crashes) {
  // A peer that offers actor flow control, then acknowledges actor
  // messages it was never sent.
  auto hello = pb::make_hello(pb::protocol_version, opts.max_message_len_bytes,
                              opts.recv_depth, true,
                              pb::EXT_REMOTE_ACTORS | pb::EXT_ACTOR_FLOW);
  hello.mutable_hello()->set_actor_window_messages(4);
  hello.mutable_hello()->set_actor_window_bytes(1024);
  send(hello);
  auto ack = [](uint64_t messages, uint64_t bytes) {
    pb::Message m;
    m.mutable_actor_ack()->set_messages(messages);
    m.mutable_actor_ack()->set_bytes(bytes);
    return m;
  };
  auto before = server_stats().protocol_errors;
  send(ack(5, 0));                       // more messages than were sent
  send(ack(0, uint64_t{1} << 63));       // more bytes than were sent
  send(ack(~uint64_t{0}, ~uint64_t{0})); // everything
  send(ack(0, 0));                       // nothing: valid
  BOOST_TEST(
      eventually([&] { return server_stats().protocol_errors == before + 3; }));
  BOOST_TEST(server_stats().actor_acks_received == 1u);
  expect_still_serving();
}

/// A server that takes at most 4 actor messages of a peer before credit.
struct small_actor_window_fixture : raw_peer_fixture {
  static options window_options() {
    auto o = limited_options();
    o.actor_window_messages = 4;
    return o;
  }
  small_actor_window_fixture() : raw_peer_fixture(window_options()) {}
};

BOOST_FIXTURE_TEST_CASE(a_peer_over_the_actor_window_is_disconnected,
                        small_actor_window_fixture) {
  // An actor that leaves every message in its mailbox: no credit returns.
  auto slow = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](int32_t) -> caf::result<void> { return caf::skip(); }};
  });
  auto published = call<bool>(sys, server_conn, publish_atom::value,
                              std::string{"slow"}, slow);
  BOOST_REQUIRE_MESSAGE(published, render(published));
  auto hello = pb::make_hello(pb::protocol_version, opts.max_message_len_bytes,
                              opts.recv_depth, true,
                              pb::EXT_REMOTE_ACTORS | pb::EXT_ACTOR_FLOW);
  send(hello);
  auto target = lookup_as_peer("slow");
  BOOST_REQUIRE(target != 0u);
  auto bytes = serialize_message(sys, caf::make_message(int32_t{7}));
  BOOST_REQUIRE(bytes);
  // Five asynchronous messages, one over the window, without waiting for
  // an ActorAck (none comes: the actor takes nothing).
  for (int i = 0; i < 5; ++i)
    send_actor_message(target, *bytes);
  bool down = false;
  for (int i = 0; i < 64 && !down; ++i)
    inbox->receive([&](transport::qp_down_atom, caf::error&) { down = true; },
                   [&](transport::recv_atom, local_mr&) {},
                   caf::after(std::chrono::seconds(10 * timeout_scale())) >>
                       [&] { i = 64; });
  BOOST_TEST(down, "the agent kept a peer over its actor window");
  caf::anon_send_exit(slow, caf::exit_reason::user_shutdown);
}

// -- cumulative acknowledgements ----------------------------------------------

// A peer whose Hello did not offer cumulative acknowledgements (this raw
// peer sends no Hello at all, like an async-rdma peer) gets one
// SendDataResponse per SendData, each naming only its own request.
BOOST_AUTO_TEST_CASE(a_peer_without_the_offer_gets_one_response_per_send_data) {
  std::set<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    ids.insert(next_id);
    send(pb::make_send_data(next_id++, 100), 100);
  }
  for (int i = 0; i < 4; ++i) {
    auto res = next_response();
    BOOST_TEST(ids.erase(res.request_id()) == 1u);
    BOOST_TEST(pb::status_of(res) == pb::OK);
    BOOST_TEST(res.send_data().also_acked_size() == 0);
  }
  BOOST_TEST(server_stats().merged_acks_sent == 0u);
}

// With the offer, every SendData is acknowledged exactly once, OK, and the
// responses may each cover several (at most max_acks_per_response).
BOOST_AUTO_TEST_CASE(a_peer_with_the_offer_gets_every_send_data_acked_once) {
  send(pb::make_hello(pb::protocol_version, opts.max_message_len_bytes,
                      opts.recv_depth, true));
  // In groups of 8 (half the receive pool): this peer reads the responses
  // only after each group, and its unread responses hold its receive
  // buffers, i.e. the agent's credits.
  const int groups = 5;
  const int group = 8;
  const int count = groups * group;
  size_t frames = 0;
  for (int g = 0; g < groups; ++g) {
    std::set<uint64_t> ids;
    for (int i = 0; i < group; ++i) {
      ids.insert(next_id);
      send(pb::make_send_data(next_id++, 100), 100);
    }
    while (!ids.empty()) {
      auto res = next_response();
      ++frames;
      BOOST_TEST(pb::status_of(res) == pb::OK);
      BOOST_TEST(res.send_data().also_acked_size() + 1
                 <= int(tuning::max_acks_per_response));
      BOOST_TEST(ids.erase(res.request_id()) == 1u);
      for (auto id : res.send_data().also_acked())
        BOOST_TEST(ids.erase(id) == 1u);
    }
  }
  BOOST_TEST(frames <= size_t(count));
  BOOST_TEST_MESSAGE(count << " SendData acknowledged in " << frames
                           << " responses");
  BOOST_TEST(server_stats().merged_acks_sent == count - frames);
  expect_still_serving();
}

// Our side takes cumulative acknowledgements: one response completes
// several chunks of one send_data; ids it does not know are counted and
// dropped, like any unknown id.
BOOST_AUTO_TEST_CASE(one_cumulative_response_completes_several_chunks) {
  auto mr = call<local_mr>(sys, server_conn, alloc_local_mr_atom::value,
                           uint64_t{10000}, uint64_t{64});
  BOOST_REQUIRE(mr);
  // The user's call blocks on another thread while this one plays the peer.
  auto sent = std::async(std::launch::async, [&] {
    return call<uint64_t>(sys, server_conn, send_data_atom::value, *mr);
  });
  // 10000 bytes in chunks of at most 4096 bytes minus the frame overhead.
  std::vector<uint64_t> ids;
  uint64_t bytes = 0;
  while (bytes < 10000) {
    auto req = next_request();
    BOOST_REQUIRE(req.has_send_data());
    ids.push_back(req.request_id());
    bytes += req.send_data().len();
  }
  BOOST_REQUIRE(ids.size() >= 3u);
  ids.push_back(777); // unknown
  auto before = server_stats().protocol_errors;
  send(pb::make_send_data_acks(ids));
  auto n = sent.get();
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_TEST(*n == 10000u);
  auto s = server_stats();
  BOOST_TEST(s.merged_acks_received == ids.size() - 2);
  BOOST_TEST(s.protocol_errors == before + 1);
}

BOOST_AUTO_TEST_CASE(memory_allocated_for_a_peer_returns_when_it_goes) {
  for (int i = 0; i < 5; ++i) {
    auto id = next_id++;
    send(pb::make_alloc_mr(id, 100000, 64));
    BOOST_TEST(pb::status_of(next_response()) == pb::OK);
  }
  BOOST_TEST(server->memory_stats().bytes_in_use >= 500000u);
  BOOST_TEST(server_stats().owned_mrs == 5u);
  caf::scoped_actor watcher{sys};
  watcher->monitor(server_conn);
  caf::anon_send_exit(tr, caf::exit_reason::user_shutdown); // peer leaves
  watcher->receive([&](caf::down_msg& down) {
    BOOST_TEST(code_of(down.reason) == errc::peer_gone);
  });
  BOOST_TEST(
      eventually([&] { return server->memory_stats().bytes_in_use == 0; }));
}

BOOST_AUTO_TEST_CASE(alloc_over_the_peer_quota_is_refused_other_peers_not) {
  std::vector<pb::MrToken> tokens;
  for (uint32_t i = 0; i < opts.peer_max_mrs; ++i) {
    auto id = next_id++;
    send(pb::make_alloc_mr(id, 1000, 8));
    auto res = next_response();
    BOOST_REQUIRE(pb::status_of(res) == pb::OK);
    tokens.push_back(res.alloc_mr().token());
  }
  auto id = next_id++;
  send(pb::make_alloc_mr(id, 1000, 8));
  BOOST_TEST(pb::status_of(next_response()) == pb::QUOTA_EXCEEDED);
  BOOST_TEST(server_stats().peer_alloc_bytes == opts.peer_max_mrs * 1000u);
  // Another peer is unaffected.
  auto other = node::open(sys, opts);
  BOOST_REQUIRE(other);
  auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
  auto port
      = server->listen(host + ":0", caf::actor_cast<caf::actor>(acceptor));
  BOOST_REQUIRE(port);
  auto conn = (*other)->connect(host + ":" + std::to_string(*port));
  BOOST_REQUIRE(conn);
  auto rmr = call<remote_mr>(sys, *conn, request_remote_mr_atom::value,
                             uint64_t{1000}, uint64_t{8});
  BOOST_TEST(render(rmr) == "ok");
  // Releasing one makes room again.
  send(pb::make_release_mr(next_id++, tokens.back()));
  BOOST_TEST(pb::status_of(next_response()) == pb::OK);
  send(pb::make_alloc_mr(next_id++, 1000, 8));
  BOOST_TEST(pb::status_of(next_response()) == pb::OK);
  (*other)->close();
}

BOOST_AUTO_TEST_CASE(unclaimed_data_over_the_limit_is_refused) {
  const size_t chunk = 4000;
  size_t accepted = 0;
  pb::Status last = pb::OK;
  for (int i = 0; i < 20 && last == pb::OK; ++i) {
    send(pb::make_send_data(next_id++, chunk), chunk);
    last = pb::status_of(next_response());
    if (last == pb::OK)
      accepted += chunk;
  }
  BOOST_TEST(last == pb::QUOTA_EXCEEDED);
  BOOST_TEST(accepted == opts.peer_max_queued_bytes / chunk * chunk);
  BOOST_TEST(server_stats().queued_data_bytes == accepted);
  // Claiming data makes room.
  auto got = call<local_mr>(sys, server_conn, receive_data_atom::value);
  BOOST_REQUIRE(got);
  send(pb::make_send_data(next_id++, chunk), chunk);
  BOOST_TEST(pb::status_of(next_response()) == pb::OK);
}

BOOST_AUTO_TEST_CASE(a_peer_that_keeps_violating_is_disconnected) {
  caf::scoped_actor watcher{sys};
  watcher->monitor(server_conn);
  for (uint32_t i = 0; i < opts.peer_max_violations; ++i)
    send(pb::make_release_mr(next_id++, pb::make_token(64, 64, 1)));
  watcher->receive(
      [&](caf::down_msg& down) {
        BOOST_TEST(code_of(down.reason) == errc::peer_gone);
        BOOST_TEST(render(down.reason).find("peer-max-violations")
                   != std::string::npos);
      },
      caf::after(std::chrono::seconds(10)) >>
          [] { BOOST_FAIL("the violating peer was not disconnected"); });
  BOOST_TEST(
      eventually([&] { return server->memory_stats().bytes_in_use == 0; }));
}

BOOST_AUTO_TEST_CASE(a_peer_that_never_answers_hits_timeouts_and_limits) {
  caf::scoped_actor user{sys};
  for (uint32_t i = 0; i < opts.peer_max_pending_requests; ++i)
    user->send(server_conn, request_remote_mr_atom::value, uint64_t{64},
               uint64_t{8});
  // One more than the limit fails at once.
  auto over = call<remote_mr>(sys, server_conn, request_remote_mr_atom::value,
                              uint64_t{64}, uint64_t{8});
  BOOST_REQUIRE(!over);
  BOOST_TEST(code_of(over.error()) == errc::quota_exceeded);
  // The others time out after request-timeout-ms.
  uint32_t timeouts = 0;
  user->receive_for(timeouts, opts.peer_max_pending_requests)(
      [&](caf::error& err) {
        BOOST_TEST(code_of(err) == errc::request_timeout);
      },
      [](remote_mr&) { BOOST_FAIL("the silent peer answered"); },
      caf::after(std::chrono::seconds(10)) >> [] { BOOST_FAIL("no timeout"); });
  auto s = server_stats();
  BOOST_TEST(s.pending_requests == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

// -- rendezvous (issue 13) ----------------------------------------------------

namespace {

/// The limits above with 64 KiB messages over 4 KiB receive buffers: the
/// node offers rendezvous (reads payloads over 4 KiB with RDMA READ).
options rendezvous_limited_options() {
  auto o = limited_options();
  o.max_message_len_bytes = 64 * 1024;
  o.eager_message_len_bytes = 4096;
  o.peer_max_queued_bytes = 48 * 1024;
  return o;
}

struct rendezvous_peer_fixture : raw_peer_fixture {
  rendezvous_peer_fixture() : raw_peer_fixture(rendezvous_limited_options()) {}

  /// Memory of the raw peer the agent may read, filled with a pattern.
  local_mr readable(size_t len) {
    auto mr = pool->allocate(len, 64, transport::access::remote_read);
    BOOST_REQUIRE_MESSAGE(mr, render(mr));
    for (size_t i = 0; i < len; ++i)
      mr->data()[i] = static_cast<uint8_t>(i * 7 + 1);
    return *mr;
  }
};

} // namespace

// A node whose eager size is its max message length offers no rendezvous:
// a SendData naming a source is refused, counted, and the agent serves on.
BOOST_AUTO_TEST_CASE(a_rendezvous_to_a_node_that_did_not_offer_it_is_refused) {
  raw_peer_fixture f;
  auto id = f.next_id++;
  f.send(pb::make_send_data_rendezvous(id, pb::make_token(0x10000, 8192, 5)));
  auto res = f.next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::MALFORMED);
  auto s = f.server_stats();
  BOOST_TEST(s.rejected_requests == 1u);
  BOOST_TEST(s.rendezvous_read == 0u);
  f.expect_still_serving();
}

BOOST_FIXTURE_TEST_SUITE(hostile_rendezvous, rendezvous_peer_fixture)

// The agent reads an honest rendezvous chunk from the peer's memory,
// delivers exactly those bytes and answers OK; once the user drops them,
// the memory is back.
BOOST_AUTO_TEST_CASE(an_honest_rendezvous_is_read_and_delivered) {
  const size_t len = 40 * 1024;
  auto src = readable(len);
  auto id = next_id++;
  send(pb::make_send_data_rendezvous(
      id, pb::make_token(src.addr(), len, src.rkey())));
  auto res = next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::OK);
  {
    auto got = call<local_mr>(sys, server_conn, receive_data_atom::value);
    BOOST_REQUIRE_MESSAGE(got, render(got));
    BOOST_REQUIRE_EQUAL(got->size(), len);
    BOOST_TEST(std::memcmp(got->data(), src.data(), len) == 0);
  }
  auto s = server_stats();
  BOOST_TEST(s.rendezvous_read == 1u);
  BOOST_TEST(s.rendezvous_bytes == 0u);
  BOOST_TEST(
      eventually([&] { return server->memory_stats().bytes_in_use == 0u; }));
}

// Headers a hostile peer may send: each is refused with an error status
// before anything is allocated or read, counted, and the agent serves on.
BOOST_AUTO_TEST_CASE(hostile_rendezvous_headers_are_error_answers) {
  auto src = readable(8192);
  struct bad_case {
    uint64_t len;
    pb::MrToken token;
    pb::Status status;
  };
  auto tok = [&](uint64_t addr, uint64_t len) {
    return pb::make_token(addr, len, src.rkey());
  };
  std::vector<bad_case> cases{
      // the token names fewer bytes than SendData.len
      {8192, tok(src.addr(), 4096), pb::LENGTH_MISMATCH},
      // a huge length
      {uint64_t{1} << 40, tok(src.addr(), uint64_t{1} << 40), pb::SIZE_LIMIT},
      // beyond the max message length this node offered
      {64 * 1024 + 1, tok(src.addr(), 64 * 1024 + 1), pb::SIZE_LIMIT},
      // within it but beyond peer-max-queued-bytes
      {60 * 1024, tok(src.addr(), 60 * 1024), pb::QUOTA_EXCEEDED},
      // a range that wraps around the address space
      {8192, tok(~uint64_t{0} - 100, 8192), pb::MALFORMED},
      // small enough for an eager SendData
      {100, tok(src.addr(), 100), pb::MALFORMED},
      // zero bytes
      {0, tok(src.addr(), 0), pb::MALFORMED},
  };
  uint64_t refused = 0;
  for (auto& c : cases) {
    auto id = next_id++;
    auto msg = pb::make_send_data_rendezvous(id, c.token);
    msg.mutable_request()->mutable_send_data()->set_len(c.len);
    send(msg);
    auto res = next_response();
    BOOST_TEST(res.request_id() == id);
    BOOST_TEST(pb::status_of(res) == c.status,
               "case len " << c.len << ": " << pb::status_of(res));
    ++refused;
    // Under peer-max-violations (6) in a row: a good request in between.
    if (refused % 4 == 0)
      expect_still_serving();
  }
  auto s = server_stats();
  BOOST_TEST(s.rejected_requests == refused);
  BOOST_TEST(s.rendezvous_read == 0u);
  BOOST_TEST(s.rendezvous_bytes == 0u);
  expect_still_serving();
  // Only the two regions the good requests allocated are held.
  BOOST_TEST(server_stats().owned_mrs == 2u);
}

// A source the peer's device does not know (a wrong rkey) cannot be checked
// before the READ: the READ fails, which ends the connection as on any
// reliable connection; the node survives and every byte returns.
BOOST_AUTO_TEST_CASE(
    a_rendezvous_source_that_cannot_be_read_ends_the_connection) {
  caf::scoped_actor watcher{sys};
  watcher->monitor(server_conn);
  auto src = readable(8192);
  send(pb::make_send_data_rendezvous(
      next_id++, pb::make_token(src.addr(), 8192, src.rkey() + 12345)));
  bool down = false;
  watcher->receive([&](caf::down_msg&) { down = true; },
                   caf::after(std::chrono::seconds(10 * timeout_scale())) >>
                       [] {});
  BOOST_TEST(down);
  BOOST_TEST(
      eventually([&] { return server->memory_stats().bytes_in_use == 0u; }));
}

BOOST_AUTO_TEST_SUITE_END()

// -- partial actor messages: budget and deadline (issue 39) -------------------

namespace {

/// A raw peer with a short peer-partial-timeout-ms that has looked up a
/// published echo actor, ready to send it chunked requests.
struct partial_peer_fixture : raw_peer_fixture {
  static constexpr uint32_t timeout_ms = 300;
  /// A request of the peer's actor 7 (the bits CAF's message_id reads).
  static constexpr uint64_t request_mid = 0x1000000000000001ull;

  caf::actor echo;
  uint64_t target = 0;

  static options partial_options() {
    auto o = limited_options();
    o.peer_partial_timeout_ms = timeout_ms;
    return o;
  }

  partial_peer_fixture() : raw_peer_fixture(partial_options()) {
    echo = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
      return {[](int32_t x) { return x; }};
    });
    BOOST_REQUIRE(server->publish("echo", echo));
    send(pb::make_hello(pb::protocol_version, opts.max_message_len_bytes,
                        opts.recv_depth, true, pb::EXT_REMOTE_ACTORS));
    target = lookup_as_peer("echo");
    BOOST_REQUIRE(target != 0u);
  }

  ~partial_peer_fixture() {
    caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  }

  /// Sends one chunk of `len` bytes of the request; the first one
  /// (`total` set) announces the whole message.
  void send_chunk(size_t len, uint64_t total = 0) {
    pb::Message m;
    auto* a = m.mutable_actor_message();
    a->set_target(target);
    a->set_sender(7);
    a->set_message_id(request_mid);
    a->set_len(len);
    if (total != 0)
      a->set_total_len(total);
    send(m, len);
  }

  /// Waits for the answer to the request: an actor message to actor 7
  /// that responds to it.
  void expect_request_answered() {
    auto msg = next_message(
        [](const pb::Message& m) {
          return m.has_actor_message() && m.actor_message().target() == 7u;
        },
        "answer to the chunked request");
    auto& a = msg.actor_message();
    BOOST_TEST(a.message_id()
               == caf::message_id{request_mid}.response_id().integer_value());
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(hostile_partials, partial_peer_fixture)

// The first chunks of a large request and never the rest, while the peer
// keeps the connection busy with Pings: the reassembly is dropped at
// peer-partial-timeout-ms from its first chunk (the Pings do not extend
// it), the requester gets an answer, the agent serves on, and every byte
// returns when the peer goes.
BOOST_AUTO_TEST_CASE(an_unfinished_actor_message_is_dropped_at_its_deadline) {
  auto errors = server_stats().protocol_errors;
  auto start = std::chrono::steady_clock::now();
  send_chunk(1000, 1 << 20);
  for (int i = 0; i < 9; ++i)
    send_chunk(1000);
  BOOST_TEST(
      eventually([&] { return server_stats().partial_actor_bytes >= 10000u; }));
  auto deadline = start + std::chrono::milliseconds{timeout_ms};
  while (server_stats().partials_dropped == 0
         && std::chrono::steady_clock::now()
                < deadline + std::chrono::seconds(5 * timeout_scale())) {
    send(pb::make_ping(next_id++));
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  auto dropped_at = std::chrono::steady_clock::now();
  auto s = server_stats();
  BOOST_REQUIRE(s.partials_dropped == 1u);
  BOOST_TEST((dropped_at >= deadline));
  BOOST_TEST(s.partial_actor_bytes == 0u);
  BOOST_TEST(s.protocol_errors > errors);
  expect_request_answered();
  expect_still_serving();
  caf::scoped_actor watcher{sys};
  watcher->monitor(server_conn);
  caf::anon_send_exit(tr, caf::exit_reason::user_shutdown); // peer leaves
  watcher->receive([](caf::down_msg&) {});
  BOOST_TEST(
      eventually([&] { return server->memory_stats().bytes_in_use == 0; }));
}

// A chunked request that outgrows the peer's budget (peer-max-queued-bytes,
// 64 KiB here) is dropped before its deadline; the requester gets an
// answer, and the chunks that still come are dropped without another
// violation.
BOOST_AUTO_TEST_CASE(an_actor_message_over_the_peer_budget_is_dropped) {
  send_chunk(1000, 1 << 20);
  for (int i = 0; i < 70; ++i)
    send_chunk(1000);
  BOOST_TEST(eventually([&] { return server_stats().partials_dropped == 1; }));
  BOOST_TEST(server_stats().partial_actor_bytes == 0u);
  expect_request_answered();
  expect_still_serving();
  BOOST_TEST(server_stats().partials_dropped == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

// -- credits are a contract (issue 39) ----------------------------------------

BOOST_FIXTURE_TEST_SUITE(credits_contract, system_holder)

// A raw peer sends Pings into every receive the node has posted and never
// returns a credit (immediate value 0 on every send, its receives never
// reposted): every Pong waits in the node's link for a credit.  The node
// counts the receives it granted; once the peer consumed more, the
// connection ends with `quota_exceeded` ("it ignores credits") at the
// first Ping past a grant of under three times the receive depth, so the
// replies it queued stay bounded.  Another client is served all along.
BOOST_AUTO_TEST_CASE(a_peer_that_ignores_credits_is_cut_off_and_others_served) {
  auto opts = test_options();
  opts.recv_depth = 8;
  auto server = node::open(sys, opts);
  BOOST_REQUIRE(server);
  caf::scoped_actor acceptor{sys};
  auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
  auto port
      = (*server)->listen(host + ":0", caf::actor_cast<caf::actor>(acceptor));
  BOOST_REQUIRE(port);
  auto d = transport::open_device(opts);
  BOOST_REQUIRE(d);
  auto dev = *d;
  auto qp
      = dev->connect(host, *port, {opts.max_message_len_bytes, opts.recv_depth},
                     std::chrono::milliseconds(3000));
  BOOST_REQUIRE_MESSAGE(qp, render(qp));
  auto& raw = **qp;
  connection_actor conn;
  acceptor->receive([&](accepted_atom, connection_actor& c) { conn = c; },
                    caf::after(std::chrono::seconds(5)) >> [] {});
  BOOST_REQUIRE(conn);
  acceptor->monitor(conn);
  auto depth = raw.params().recv_depth;
  auto slot = raw.params().max_message_len_bytes;
  // Receives for what the node may send with the credits it starts with;
  // never reposted.
  std::vector<uint8_t> rx(size_t{slot} * depth);
  auto rx_reg = dev->register_memory(rx.data(), rx.size(),
                                     transport::access::local_write);
  BOOST_REQUIRE(rx_reg);
  constexpr uint64_t recv_bit = uint64_t{1} << 63;
  for (uint32_t i = 0; i < depth; ++i) {
    transport::sge sg{reinterpret_cast<uint64_t>(rx.data() + size_t{i} * slot),
                      slot, (*rx_reg)->lkey()};
    BOOST_REQUIRE(!raw.post_recv(recv_bit | i, &sg, 1));
  }
  auto ping = pb::make_ping(1);
  std::vector<uint8_t> frame(pb::frame_header_len + ping.ByteSizeLong());
  auto enc = pb::encode(ping, frame.data(), frame.size(), slot);
  BOOST_REQUIRE(enc.code == errc::none);
  auto tx_reg = dev->register_memory(frame.data(), enc.header_len, 0);
  BOOST_REQUIRE(tx_reg);
  transport::sge tx{reinterpret_cast<uint64_t>(frame.data()),
                    static_cast<uint32_t>(enc.header_len), (*tx_reg)->lkey()};
  // One Ping at a time: a send completes once the node placed it.
  size_t placed = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool failed = false;
  for (uint64_t wr = 1; !failed && std::chrono::steady_clock::now() < deadline;
       ++wr) {
    if (raw.post_send(wr, &tx, 1, uint32_t{0}, true)) {
      failed = true;
      break;
    }
    for (bool done = false; !done && !failed;) {
      transport::work_completion wcs[16];
      auto n = raw.poll_cq(wcs, 16);
      for (size_t i = 0; i < n; ++i) {
        if (wcs[i].wr_id & recv_bit)
          continue; // a Pong or a credit message: taken, never reposted
        if (wcs[i].status != transport::wc_status::success)
          failed = true;
        else if (wcs[i].wr_id == wr) {
          ++placed;
          done = true;
        }
      }
      if (n == 0) {
        if (raw.in_error() || std::chrono::steady_clock::now() > deadline)
          failed = true;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }
  BOOST_TEST(failed);
  // The peer is granted fewer than three times the depth and cut off at
  // the first Ping past its grant.  On verbs a send completes when the
  // node's device takes it into a posted receive, before the node's link
  // sees it, so a few more (at most the receives posted: the depth) may be
  // placed until the link has failed.
  BOOST_TEST(placed < 4u * depth, placed << " Pings placed");
  // The node ended that connection for the reason named.
  caf::error reason;
  acceptor->receive([&](caf::down_msg& dm) { reason = dm.reason; },
                    caf::after(std::chrono::seconds(10)) >> [] {});
  // The connection reports the peer gone, naming the link's failure.
  BOOST_TEST(code_of(reason) == errc::peer_gone, render(reason));
  BOOST_TEST(render(reason).find("quota_exceeded") != std::string::npos,
             render(reason));
  BOOST_TEST(render(reason).find("ignores credits") != std::string::npos,
             render(reason));
  // Another client is served.
  auto other = node::open(sys, opts);
  BOOST_REQUIRE(other);
  auto good = (*other)->connect(host + ":" + std::to_string(*port));
  BOOST_REQUIRE(good);
  auto rmr = call<remote_mr>(sys, *good, request_remote_mr_atom::value,
                             uint64_t{1000}, uint64_t{8});
  BOOST_TEST(render(rmr) == "ok");
  (*other)->close();
  (*server)->close();
}

BOOST_AUTO_TEST_SUITE_END()
