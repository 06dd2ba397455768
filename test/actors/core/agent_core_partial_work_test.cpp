// agent_core_test: the budget and deadlines of partial work.

#include <boost/test/unit_test.hpp>

#include "test/actors/core/agent_core_rendezvous_fixture.hpp"

// -- the budget and deadlines of partial work (issue 39) ----------------------

namespace {

/// The actor rendezvous fixture with a short peer-partial-timeout-ms.
struct partial_fixture : actor_rendezvous_fixture {
  static constexpr uint32_t timeout_ms = 500;

  partial_fixture() {
    opts.peer_partial_timeout_ms = timeout_ms;
    opts.peer_max_violations = 100;
    make_core();
    peer_hello(false);
    out.posted.clear();
  }

  /// A chunk of the request `mid` to target 5 carrying `len` bytes; the
  /// first one (`total` set) announces the whole message.
  pb::Message actor_chunk(size_t len, uint64_t total = 0, uint64_t mid = 7) {
    pb::Message msg;
    auto* m = msg.mutable_actor_message();
    m->set_target(5);
    m->set_sender(6);
    m->set_message_id(mid);
    m->set_len(len);
    if (total != 0)
      m->set_total_len(total);
    return msg;
  }

  /// Hands one frame from the peer to the core at `t`.
  void receive_at(agent_core::time_point t, const pb::Message& msg,
                  const std::string& payload = {}) {
    core->on_frame(frame(msg, payload), t);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(partial_work, partial_fixture)

// A chunked actor message whose rest never comes is dropped at its
// deadline, counted from its first chunk: its own chunks and the peer's
// Pings on the way do not extend it.  The requester learns why (the sink
// answers it), and the drop counts as a violation.
BOOST_AUTO_TEST_CASE(a_partial_actor_message_is_dropped_at_its_deadline) {
  using std::chrono::milliseconds;
  auto sweeps = out.sweeps;
  receive_at(t0, actor_chunk(1000, 100000), std::string(1000, 'a'));
  BOOST_TEST(out.partial_on);
  BOOST_TEST(out.sweeps > sweeps); // the owner's sweep enforces it
  BOOST_TEST(core->stats().partial_actor_bytes == 1000u);
  for (int i = 1; i < 5; ++i) {
    auto t = t0 + milliseconds{i * 100};
    receive_at(t, pb::make_ping(1000 + i));
    receive_at(t, actor_chunk(1000), std::string(1000, 'b'));
    BOOST_TEST((core->expire(t) == t0 + milliseconds{timeout_ms}));
  }
  BOOST_TEST(out.partial_drops.empty());
  BOOST_TEST(core->stats().partial_actor_bytes == 5000u);
  auto errors = core->stats().protocol_errors;
  BOOST_TEST((core->expire(t0 + milliseconds{timeout_ms})
              == agent_core::time_point::max()));
  BOOST_REQUIRE_EQUAL(out.partial_drops.size(), 1u);
  BOOST_TEST(code_of(out.partial_drops[0]) == errc::request_timeout);
  BOOST_TEST(what_of(out.partial_drops[0]).find("peer-partial-timeout-ms")
             != std::string::npos);
  BOOST_TEST(!out.partial_on);
  auto s = core->stats();
  BOOST_TEST(s.partials_dropped == 1u);
  BOOST_TEST(s.protocol_errors == errors + 1);
  BOOST_TEST(s.partial_actor_bytes == 0u);
  BOOST_TEST(out.disconnects.empty());
  // A violation: with peer-max-violations=1 the same drop disconnects.
  opts.peer_max_violations = 1;
  make_core();
  peer_hello(false);
  receive_at(t0, actor_chunk(1000, 100000), std::string(1000, 'a'));
  core->expire(t0 + milliseconds{timeout_ms});
  BOOST_REQUIRE_EQUAL(out.disconnects.size(), 1u);
  BOOST_TEST(code_of(out.disconnects[0]) == errc::quota_exceeded);
}

// A message that completes in time is not touched; the next one gets a
// deadline of its own.
BOOST_AUTO_TEST_CASE(a_partial_finished_in_time_leaves_no_deadline) {
  using std::chrono::milliseconds;
  receive_at(t0, actor_chunk(1000, 2000), std::string(1000, 'a'));
  receive_at(t0 + milliseconds{400}, actor_chunk(1000), std::string(1000, 'b'));
  BOOST_TEST(!out.partial_on);
  BOOST_TEST(
      (core->expire(t0 + milliseconds{400}) == agent_core::time_point::max()));
  receive_at(t0 + milliseconds{450}, actor_chunk(1000, 3000, 8),
             std::string(1000, 'c'));
  BOOST_TEST((core->expire(t0 + milliseconds{timeout_ms})
              == t0 + milliseconds{450 + timeout_ms}));
  BOOST_TEST(out.partial_drops.empty());
  core->expire(t0 + milliseconds{450 + timeout_ms});
  BOOST_TEST(out.partial_drops.size() == 1u);
}

// The reassembly counts against the peer's budget (peer-max-queued-bytes)
// with what else it holds: past it the message is dropped, the requester
// answered with quota_exceeded, a violation counted.
BOOST_AUTO_TEST_CASE(a_partial_actor_message_over_the_budget_is_dropped) {
  opts.peer_max_queued_bytes = 3500;
  make_core();
  peer_hello(false);
  receive(pb::make_send_data(1, 500), std::string(500, 'd')); // unclaimed
  BOOST_TEST(out.queued_bytes == 500u);
  receive(actor_chunk(1000, 100000), std::string(1000, 'a'));
  receive(actor_chunk(1000), std::string(1000, 'b'));
  receive(actor_chunk(1000), std::string(1000, 'c')); // 3500: at the limit
  BOOST_TEST(out.partial_drops.empty());
  auto errors = core->stats().protocol_errors;
  receive(actor_chunk(1000), std::string(1000, 'e'));
  BOOST_REQUIRE_EQUAL(out.partial_drops.size(), 1u);
  BOOST_TEST(code_of(out.partial_drops[0]) == errc::quota_exceeded);
  BOOST_TEST(what_of(out.partial_drops[0]).find("peer-max-queued-bytes")
             != std::string::npos);
  auto s = core->stats();
  BOOST_TEST(s.partials_dropped == 1u);
  BOOST_TEST(s.protocol_errors == errors + 1);
  // And a rendezvous READ finds the budget taken by a partial.
  out.posted.clear();
  receive(actor_chunk(1000, 100000, 9), std::string(1000, 'f'));
  receive(actor_rendezvous(2, 0x10000, 5000, 5000));
  BOOST_TEST(out.reads.empty());
  BOOST_REQUIRE_EQUAL(answers().size(), 1u);
  BOOST_TEST(answers()[0].second == pb::QUOTA_EXCEEDED);
}

// A rendezvous READ that does not complete by its deadline ends the
// connection (its memory stays the READ's until the queue pair is gone),
// whatever else the peer sends meanwhile; a READ done in time leaves no
// deadline behind.
BOOST_AUTO_TEST_CASE(a_stalled_rendezvous_read_ends_the_connection) {
  using std::chrono::milliseconds;
  receive_at(t0, rendezvous(1, 0x10000, 8000));
  BOOST_REQUIRE_EQUAL(out.reads.size(), 1u);
  out.reads[0].done(caf::error{});
  BOOST_TEST((core->expire(t0 + milliseconds{timeout_ms})
              == agent_core::time_point::max()));
  auto t1 = t0 + milliseconds{1000};
  receive_at(t1, actor_rendezvous(2, 0x20000, 8000, 8000));
  receive_at(t1 + milliseconds{100}, rendezvous(3, 0x30000, 8000));
  BOOST_REQUIRE_EQUAL(out.reads.size(), 3u);
  for (int i = 1; i < 5; ++i) {
    auto t = t1 + milliseconds{i * 100};
    receive_at(t, pb::make_ping(1000 + i));
    BOOST_TEST((core->expire(t) == t1 + milliseconds{timeout_ms}));
  }
  BOOST_TEST(out.disconnects.empty());
  core->expire(t1 + milliseconds{timeout_ms});
  BOOST_REQUIRE_EQUAL(out.disconnects.size(), 1u);
  BOOST_TEST(code_of(out.disconnects[0]) == errc::request_timeout);
  BOOST_TEST(what_of(out.disconnects[0]).find("peer-partial-timeout-ms")
             != std::string::npos);
  BOOST_TEST(core->stats().partials_dropped == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
