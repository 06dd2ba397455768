#include <boost/test/unit_test.hpp>

// The suite `hostile_partials`: a scripted raw peer on the deterministic
// harness (test/support/scripted_peer.hpp) sends chunked actor messages it
// never finishes or that outgrow its budget; the deadline runs on the
// simulated clock.

#include <chrono>
#include <string>

#include <caf/event_based_actor.hpp>

#include "test/support/scripted_peer.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

/// A scripted peer with a short peer-partial-timeout-ms that has looked up
/// an echo actor the agent published, ready to send it chunked requests.
struct partial_peer : scripted_peer {
  static constexpr uint32_t timeout_ms = 300;
  /// A request of the peer's actor 7 (the bits CAF's message_id reads).
  static constexpr uint64_t request_mid = 0x1000000000000001ull;

  caf::actor echo;
  uint64_t target = 0;

  static options partial_options() {
    auto o = scripted_options();
    o.peer_partial_timeout_ms = timeout_ms;
    return o;
  }

  partial_peer() : scripted_peer(partial_options()) {
    echo = h.sys().spawn([](caf::event_based_actor*) -> caf::behavior {
      return {[](int32_t x) { return x; }};
    });
    auto published
        = h.call<bool>(agent, publish_atom::value, std::string{"echo"}, echo);
    BOOST_REQUIRE_MESSAGE(published, render(published));
    send(pb::make_hello(pb::protocol_version, opts.max_message_len_bytes,
                        opts.recv_depth, true, pb::EXT_REMOTE_ACTORS));
    pb::Message lookup;
    lookup.mutable_request()->set_request_id(next_id++);
    lookup.mutable_request()->mutable_actor_lookup()->set_name("echo");
    send(lookup);
    auto res = next_response();
    BOOST_REQUIRE(res.has_actor_lookup());
    target = res.actor_lookup().actor_id();
    BOOST_REQUIRE(target != 0u);
  }

  ~partial_peer() {
    caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
    echo = caf::actor{};
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

  /// Checks that the request was answered: an actor message to actor 7
  /// that responds to it.
  void expect_request_answered() {
    auto f = next_frame(
        [](const agent_frame& x) {
          return x.msg.has_actor_message()
                 && x.msg.actor_message().target() == 7u;
        },
        "answer to the chunked request");
    BOOST_TEST(f.msg.actor_message().message_id()
               == caf::message_id{request_mid}.response_id().integer_value());
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(hostile_partials, partial_peer)

// The first chunks of a large request and never the rest, while the peer
// keeps the connection busy with Pings: the reassembly is dropped at
// peer-partial-timeout-ms from its first chunk (the Pings do not extend
// it), the requester gets an answer, the agent serves on, and every byte
// returns when the peer goes.
BOOST_AUTO_TEST_CASE(an_unfinished_actor_message_is_dropped_at_its_deadline) {
  auto errors = stats().protocol_errors;
  auto start = h.now();
  send_chunk(1000, 1 << 20);
  for (int i = 0; i < 9; ++i)
    send_chunk(1000);
  h.settle();
  BOOST_TEST(stats().partial_actor_bytes >= 10000u);
  auto deadline = start + std::chrono::milliseconds{timeout_ms};
  while (stats().partials_dropped == 0
         && h.now() < deadline + std::chrono::milliseconds{timeout_ms}) {
    BOOST_TEST((h.now() < deadline), "still held past the deadline");
    h.advance(25);
    send(pb::make_ping(next_id++));
    h.settle();
  }
  auto s = stats();
  BOOST_REQUIRE(s.partials_dropped == 1u);
  BOOST_TEST((h.now() >= deadline));
  BOOST_TEST(s.partial_actor_bytes == 0u);
  BOOST_TEST(s.protocol_errors > errors);
  expect_request_answered();
  expect_still_serving();
  auto down = h.watch(agent);
  fail_link(); // the peer leaves
  BOOST_REQUIRE(down->down);
  BOOST_TEST(agent_bytes() == 0u);
}

// A chunked request that outgrows the peer's budget (peer-max-queued-bytes,
// 64 KiB here) is dropped before its deadline; the requester gets an
// answer, and the chunks that still come are dropped without another
// violation.
BOOST_AUTO_TEST_CASE(an_actor_message_over_the_peer_budget_is_dropped) {
  send_chunk(1000, 1 << 20);
  for (int i = 0; i < 70; ++i)
    send_chunk(1000);
  h.settle();
  BOOST_TEST(stats().partials_dropped == 1u);
  BOOST_TEST(stats().partial_actor_bytes == 0u);
  expect_request_answered();
  expect_still_serving();
  BOOST_TEST(stats().partials_dropped == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
