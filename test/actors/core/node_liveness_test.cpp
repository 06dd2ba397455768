// The keepalive state shared by the connections of a node to one peer node
// (actors/core/node_liveness.hpp), alone and through `liveness`; part of the
// liveness_test suite.

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>

#include "actors/core/liveness.hpp"
#include "actors/core/node_liveness.hpp"

using namespace rdmactor;

namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;
using verdict = liveness::verdict;

/// A millisecond-aligned start (node_liveness keeps whole milliseconds);
/// `quiet` and `k`: a silence and the keepalive period.
const clock_type::time_point start{milliseconds{1'000'000}};
const milliseconds quiet{80};
const milliseconds k{100};

int a_connection = 0;
int another = 0;

/// Two connections of one node to one peer node (keepalive period k = 100 ms,
/// silences 80 and 100 ms), both last heard at start.
struct two_connections {
  node_liveness_ptr group = std::make_shared<node_liveness>();
  liveness early{k, quiet};
  liveness late{k, k};

  two_connections() {
    for (auto* l : {&early, &late}) {
      l->offered(true, true);
      l->heard(start);
      l->join(group);
    }
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(node_liveness_suite)

BOOST_AUTO_TEST_CASE(heard_keeps_the_latest_millisecond) {
  node_liveness g;
  BOOST_TEST((g.last_heard() == clock_type::time_point{}));
  g.heard(start + std::chrono::microseconds{2500});
  BOOST_TEST((g.last_heard() == start + milliseconds{2}));
  g.heard(start); // an older frame, stored late by another worker
  BOOST_TEST((g.last_heard() == start + milliseconds{2}));
  BOOST_TEST(g.heard_since(start + milliseconds{2}));
  BOOST_TEST(!g.heard_since(start + milliseconds{3}));
}

BOOST_AUTO_TEST_CASE(a_check_waits_while_the_node_was_heard) {
  node_liveness g;
  g.heard(start);
  auto p = g.check(start + milliseconds{50}, quiet, k, &a_connection);
  BOOST_TEST(!p.wake);
  BOOST_TEST((p.at == start + quiet));
}

// Of the checks that find the node silent, the first wakes (to ping); the
// others wait a period for its answer, and the woken one may come back.
BOOST_AUTO_TEST_CASE(only_the_first_check_of_a_silent_node_wakes) {
  node_liveness g;
  g.heard(start);
  auto now = start + quiet;
  BOOST_TEST(g.check(now, quiet, k, &a_connection).wake);
  auto p = g.check(now, quiet, k, &another);
  BOOST_TEST(!p.wake);
  BOOST_TEST((p.at == now + k));
  BOOST_TEST(g.check(now + milliseconds{1}, quiet, k, &a_connection).wake);
  // Nobody pinged within a period of the last wake: the next check wakes.
  BOOST_TEST(!g.check(now + k, quiet, k, &another).wake);
  BOOST_TEST(g.check(now + milliseconds{1} + k, quiet, k, &another).wake);
}

BOOST_AUTO_TEST_CASE(a_ping_holds_every_check_until_answered_or_a_period) {
  node_liveness g;
  g.heard(start);
  auto ping = start + quiet;
  g.pinged(ping);
  BOOST_TEST((g.unanswered_ping() == ping));
  auto p = g.check(ping + milliseconds{10}, quiet, k, &another);
  BOOST_TEST(!p.wake);
  BOOST_TEST((p.at == ping + k));
  // Unanswered for a period: every check wakes (to find the node dead).
  BOOST_TEST(g.check(ping + k, quiet, k, &another).wake);
  BOOST_TEST(g.check(ping + k, quiet, k, &a_connection).wake);
  // A frame in the Ping's millisecond or later answers it.
  g.heard(ping);
  BOOST_TEST(!g.unanswered_ping());
  p = g.check(ping + milliseconds{50}, quiet, k, &another);
  BOOST_TEST(!p.wake);
  BOOST_TEST((p.at == ping + quiet));
}

BOOST_AUTO_TEST_CASE(only_the_ping_withdrawn_goes) {
  node_liveness g;
  g.pinged(start);
  g.withdraw_ping(start + milliseconds{5}); // not the last Ping
  BOOST_TEST(g.unanswered_ping().has_value());
  g.withdraw_ping(start);
  BOOST_TEST(!g.unanswered_ping());
}

BOOST_AUTO_TEST_CASE(the_registry_groups_by_local_node_peer_node_and_host) {
  auto& reg = node_liveness_registry::instance();
  auto before = reg.groups();
  auto a = reg.join(11, 22, "10.0.0.1");
  auto b = reg.join(11, 22, "10.0.0.1");
  BOOST_TEST(a == b);
  BOOST_TEST(reg.join(11, 22, "10.0.0.2") != a); // another host
  BOOST_TEST(reg.join(12, 22, "10.0.0.1") != a); // another local node
  BOOST_TEST(reg.join(11, 23, "10.0.0.1") != a); // another peer node
  BOOST_TEST(reg.groups() == before + 1); // the others had no holder left
  a.reset();
  b.reset();
  BOOST_TEST(reg.groups() == before);
  BOOST_TEST(node_liveness_registry::host_of("10.0.0.1:4791") == "10.0.0.1");
  BOOST_TEST(node_liveness_registry::host_of("fe80::1:4791") == "fe80::1");
  BOOST_TEST(node_liveness_registry::host_of("peer") == "peer");
}

// Through `liveness`: a frame on one connection is a sign of life for the
// other, which then sends no Ping.
BOOST_AUTO_TEST_CASE(a_frame_on_one_connection_keeps_the_other_quiet) {
  two_connections c;
  c.early.heard(start + milliseconds{70});
  auto s = c.late.tick(start + k);
  BOOST_TEST((s.what == verdict::wait));
  BOOST_TEST((s.next == start + milliseconds{170}));
}

// One connection pings; the other waits for that Ping's answer instead of
// pinging too, and both find the node dead a period after it.
BOOST_AUTO_TEST_CASE(one_ping_speaks_for_the_group) {
  two_connections c;
  auto ping = start + quiet;
  BOOST_TEST((c.early.tick(ping).what == verdict::ping));
  c.early.pinged(7, ping);
  auto s = c.late.tick(start + k);
  BOOST_TEST((s.what == verdict::wait));
  BOOST_TEST((s.next == ping + k));
  BOOST_TEST((c.late.tick(ping + k).what == verdict::dead));
  BOOST_TEST((c.early.tick(ping + k).what == verdict::dead));
}

BOOST_AUTO_TEST_CASE(the_answer_on_one_connection_answers_for_all) {
  two_connections c;
  auto ping = start + quiet;
  c.early.tick(ping);
  c.early.pinged(7, ping);
  c.early.heard(ping + milliseconds{1}); // its Pong
  auto s = c.late.tick(ping + k);
  BOOST_TEST((s.what == verdict::wait));
  BOOST_TEST((s.next == ping + milliseconds{1} + k));
}

// A connection that closes with its Ping unanswered takes the Ping back:
// the other pings on its own instead of finding the node dead.
BOOST_AUTO_TEST_CASE(a_closing_pinger_leaves_the_ping_to_the_others) {
  two_connections c;
  auto ping = start + quiet;
  c.early.tick(ping);
  c.early.pinged(7, ping);
  c.early.closing();
  BOOST_TEST((c.late.tick(ping + k).what == verdict::ping));
}

// A connection that found the node dead leaves its Ping in place: the
// others find it dead too, not a period later.
BOOST_AUTO_TEST_CASE(a_pinger_that_found_death_leaves_its_ping) {
  two_connections c;
  auto ping = start + quiet;
  c.early.tick(ping);
  c.early.pinged(7, ping);
  BOOST_TEST((c.early.tick(ping + k).what == verdict::dead));
  c.early.closing();
  BOOST_TEST((c.late.tick(ping + k).what == verdict::dead));
}

BOOST_AUTO_TEST_SUITE_END()
