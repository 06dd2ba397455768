#include <boost/test/unit_test.hpp>

// The suite `hostile_actor_messages`: a scripted raw peer on the
// deterministic harness (test/support/scripted_peer.hpp) sends hostile
// actor frames, payloads CAF cannot handle, hostile actor acks and more
// actor messages than its window.

#include <string>
#include <vector>

#include <caf/duration.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/skip.hpp>

#include "actors/remote/actor_codec.hpp"
#include "test/support/scripted_peer.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

/// Publishes `hdl` under `name` on the peer's agent.
void publish(scripted_peer& p, const std::string& name, const caf::actor& hdl) {
  auto published = p.h.call<bool>(p.agent, publish_atom::value, name, hdl);
  BOOST_REQUIRE_MESSAGE(published, render(published));
}

/// Says hello with remote actors (and `extensions`) and looks `name` up;
/// returns the actor id the agent answers (0: nothing published).
uint64_t reach(scripted_peer& p, const std::string& name,
               uint32_t extensions = pb::EXT_REMOTE_ACTORS) {
  p.send(pb::make_hello(pb::protocol_version, p.opts.max_message_len_bytes,
                        p.opts.recv_depth, true, extensions));
  pb::Message lookup;
  lookup.mutable_request()->set_request_id(p.next_id++);
  lookup.mutable_request()->mutable_actor_lookup()->set_name(name);
  p.send(lookup);
  auto res = p.next_response();
  BOOST_REQUIRE(res.has_actor_lookup());
  return res.actor_lookup().actor_id();
}

/// An asynchronous, anonymous ActorMessage to `target` with `bytes` as its
/// payload.
template <class Bytes>
void send_actor_message(scripted_peer& p, uint64_t target, const Bytes& bytes) {
  pb::Message m;
  auto* a = m.mutable_actor_message();
  a->set_target(target);
  a->set_len(bytes.size());
  std::vector<uint8_t> buf(pb::frame_header_len + m.ByteSizeLong());
  auto enc = pb::encode(m, buf.data(), buf.size(), buf.size());
  BOOST_REQUIRE(enc.code == errc::none);
  buf.resize(enc.header_len);
  buf.insert(buf.end(), bytes.begin(), bytes.end());
  p.send_raw(std::move(buf));
}

} // namespace

BOOST_AUTO_TEST_SUITE(hostile_actor_messages)

// A lookup of an unknown name is an answer, not an error; actor messages
// to actors nobody published and chunks that do not continue their
// message are counted violations; the agent serves on.
BOOST_AUTO_TEST_CASE(hostile_actor_frames_are_refused_and_counted) {
  scripted_peer p;
  pb::Message lookup;
  auto* req = lookup.mutable_request();
  req->set_request_id(p.next_id++);
  req->mutable_actor_lookup()->set_name("nobody");
  p.send(lookup);
  auto res = p.next_response();
  BOOST_TEST(res.request_id() == req->request_id());
  BOOST_REQUIRE(res.has_actor_lookup());
  BOOST_TEST(res.actor_lookup().status() == pb::OK);
  BOOST_TEST(res.actor_lookup().actor_id() == 0u);
  req->set_request_id(p.next_id++);
  req->mutable_actor_lookup()->set_name(""); // invalid: refused
  p.send(lookup);
  res = p.next_response();
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
  auto before = p.stats().protocol_errors;
  p.send(actor_message(12345, 16, 0), 16); // nobody published it
  p.send(actor_message(1, 10, 100), 10);   // first chunk of 100 bytes
  p.send(actor_message(2, 10, 0), 10);     // does not continue it
  p.h.settle();
  BOOST_TEST(p.stats().protocol_errors == before + 2);
  p.expect_still_serving();
}

// Payloads that CAF would load and then crash on or spin on: a
// caf::duration of an unknown unit (printed, as CAF's default handler
// prints what an actor does not handle, it read out of bounds) and a
// double that decodes to an infinity (an actor that echoed it would spin
// in CAF's serializer).  Each is refused and counted; the agent and the
// published actor go on.
BOOST_AUTO_TEST_CASE(actor_payloads_that_caf_cannot_handle_are_refused) {
  scripted_peer p;
  auto echo = p.h.sys().spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](int32_t x) { return x; }};
  });
  publish(p, "echo", echo);
  auto target = reach(p, "echo");
  BOOST_REQUIRE(target != 0u);
  auto poisoned
      = [&](const caf::message& msg, size_t at, uint8_t from, uint8_t to) {
          auto bytes = serialize_message(p.h.sys(), msg);
          BOOST_REQUIRE(bytes);
          // The value's bytes end the payload; `at` counts from the end.
          auto& b = *bytes;
          BOOST_REQUIRE(b.size() > at);
          BOOST_REQUIRE(static_cast<uint8_t>(b[b.size() - at]) == from);
          b[b.size() - at] = static_cast<char>(to);
          return b;
        };
  auto before = p.stats().protocol_errors;
  // Unit seconds (2) becomes 64: u32 unit (big-endian), then u64 count.
  send_actor_message(
      p, target,
      poisoned(caf::make_message(caf::duration{caf::time_unit::seconds, 5}), 9,
               2, 64));
  // 1.0 (0x3ff0...) becomes 0x7ff0...: the largest exponent, an infinity.
  send_actor_message(p, target,
                     poisoned(caf::make_message(1.0), 8, 0x3f, 0x7f));
  p.h.settle();
  BOOST_TEST(p.stats().protocol_errors == before + 2);
  p.expect_still_serving();
  auto alive = p.h.call<int32_t>(echo, int32_t{5});
  BOOST_REQUIRE_MESSAGE(alive, render(alive));
  BOOST_TEST(*alive == 5);
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(hostile_actor_acks_are_violations_never_crashes) {
  scripted_peer p;
  // A peer that offers actor flow control, then acknowledges actor
  // messages it was never sent.
  auto hello = pb::make_hello(pb::protocol_version,
                              p.opts.max_message_len_bytes, p.opts.recv_depth,
                              true, pb::EXT_REMOTE_ACTORS | pb::EXT_ACTOR_FLOW);
  hello.mutable_hello()->set_actor_window_messages(4);
  hello.mutable_hello()->set_actor_window_bytes(1024);
  p.send(hello);
  auto ack = [](uint64_t messages, uint64_t bytes) {
    pb::Message m;
    m.mutable_actor_ack()->set_messages(messages);
    m.mutable_actor_ack()->set_bytes(bytes);
    return m;
  };
  auto before = p.stats().protocol_errors;
  p.send(ack(5, 0));                       // more messages than were sent
  p.send(ack(0, uint64_t{1} << 63));       // more bytes than were sent
  p.send(ack(~uint64_t{0}, ~uint64_t{0})); // everything
  p.send(ack(0, 0));                       // nothing: valid
  p.h.settle();
  BOOST_TEST(p.stats().protocol_errors == before + 3);
  BOOST_TEST(p.stats().actor_acks_received == 1u);
  p.expect_still_serving();
}

// A peer that sends more actor messages than the agent's window before
// an ActorAck (none comes: the actor takes nothing) is disconnected.
BOOST_AUTO_TEST_CASE(a_peer_over_the_actor_window_is_disconnected) {
  auto opts = scripted_options();
  opts.actor_window_messages = 4;
  scripted_peer p{opts};
  // An actor that leaves every message in its mailbox: no credit returns.
  auto slow = p.h.sys().spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](int32_t) -> caf::result<void> { return caf::skip(); }};
  });
  publish(p, "slow", slow);
  auto target = reach(p, "slow", pb::EXT_REMOTE_ACTORS | pb::EXT_ACTOR_FLOW);
  BOOST_REQUIRE(target != 0u);
  auto bytes = serialize_message(p.h.sys(), caf::make_message(int32_t{7}));
  BOOST_REQUIRE(bytes);
  auto down = p.h.watch(p.agent);
  for (int i = 0; i < 4; ++i)
    send_actor_message(p, target, *bytes);
  p.h.settle();
  BOOST_TEST(!down->down, "the agent cut off a peer within its window");
  send_actor_message(p, target, *bytes); // one over the window
  p.h.settle();
  BOOST_REQUIRE_MESSAGE(down->down,
                        "the agent kept a peer over its actor window");
  auto why = render(down->reason);
  BOOST_TEST(code_of(down->reason) == errc::peer_gone, why);
  BOOST_TEST(why.find("actor-window-messages") != std::string::npos, why);
  caf::anon_send_exit(slow, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()
