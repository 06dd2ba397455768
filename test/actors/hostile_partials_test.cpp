#include <boost/test/unit_test.hpp>

// The hostile suite `hostile_partials` (issue 39): chunked actor messages
// never finished or over the peer's budget.

#include <chrono>
#include <thread>

#include <caf/event_based_actor.hpp>

#include "test/actors/hostile_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

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
