#include <boost/test/unit_test.hpp>

// The agent suite `peer_departure`: an idle connection's keepalive over
// real sockets (pending requests, memory and connections when a peer goes
// or closes: test/actors/connection/agent_departure_test.cpp).

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "test/actors/agent_helpers.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(peer_departure)

namespace {

/// Waits up to `bound` for the down message of the actor `w` monitors.
std::optional<caf::error> down_reason(caf::scoped_actor& w,
                                      std::chrono::seconds bound) {
  std::optional<caf::error> out;
  w->receive([&](caf::down_msg& msg) { out = msg.reason; },
             caf::after(bound) >> [] {});
  return out;
}

} // namespace

// Keepalive (issue 15): an idle connection pings after keepalive-ms of
// silence and the peer's agent answers, so a live idle peer is never
// dropped; keepalive-ms=0 sends no pings.
BOOST_AUTO_TEST_CASE(keepalive_pings_an_idle_live_peer_and_zero_is_off) {
  auto pinging = test_options();
  pinging.keepalive_ms = 100;
  auto silent = test_options();
  silent.keepalive_ms = 0;
  system_holder server_side;
  auto server = node::open(server_side.sys, silent);
  auto client = node::open(server_side.sys, pinging);
  BOOST_REQUIRE(server && client);
  caf::scoped_actor acceptor{server_side.sys};
  auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
  auto port
      = (*server)->listen(host + ":0", caf::actor_cast<caf::actor>(acceptor));
  BOOST_REQUIRE_MESSAGE(port, render(port));
  auto conn = (*client)->connect(host + ":" + std::to_string(*port));
  BOOST_REQUIRE_MESSAGE(conn, render(conn));
  connection_actor server_end;
  acceptor->receive([&](accepted_atom, connection_actor& c) { server_end = c; },
                    caf::after(std::chrono::seconds(10)) >> [] {});
  BOOST_REQUIRE(server_end);
  caf::scoped_actor w{server_side.sys};
  w->monitor(*conn);
  auto stats = [&](const connection_actor& c) {
    auto s = call<agent_stats>(server_side.sys, c, stats_atom::value);
    return s ? *s : agent_stats{};
  };
  // Idle: the pinging end pings again and again, each Ping answered.
  BOOST_TEST(eventually([&] { return stats(*conn).keepalive_pings >= 5; },
                        std::chrono::seconds(30 * timeout_scale())));
  BOOST_TEST(stats(server_end).keepalive_pings == 0u);
  BOOST_TEST(stats(server_end).protocol_errors == 0u);
  BOOST_TEST(stats(*conn).protocol_errors == 0u);
  BOOST_TEST(!down_reason(w, std::chrono::seconds(0)));
  (*client)->close();
  (*server)->close();
}

// Keepalive watches peer nodes: of several idle connections from one node
// to another, one pings per period for all (the others hear of its Pong
// through their shared node_liveness), and none is dropped.
BOOST_AUTO_TEST_CASE(idle_connections_to_one_node_share_one_ping) {
  auto pinging = test_options();
  pinging.keepalive_ms = 200 * timeout_scale();
  auto silent = test_options();
  silent.keepalive_ms = 0;
  system_holder side;
  auto server = node::open(side.sys, silent);
  auto client = node::open(side.sys, pinging);
  BOOST_REQUIRE(server && client);
  caf::scoped_actor acceptor{side.sys};
  auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
  auto port
      = (*server)->listen(host + ":0", caf::actor_cast<caf::actor>(acceptor));
  BOOST_REQUIRE_MESSAGE(port, render(port));
  constexpr int n = 8;
  std::vector<connection_actor> conns;
  caf::scoped_actor w{side.sys};
  for (int i = 0; i < n; ++i) {
    auto conn = (*client)->connect(host + ":" + std::to_string(*port));
    BOOST_REQUIRE_MESSAGE(conn, render(conn));
    w->monitor(*conn);
    conns.push_back(*conn);
  }
  auto pings = [&] {
    uint64_t sum = 0;
    for (auto& c : conns)
      if (auto s = call<agent_stats>(side.sys, c, stats_atom::value))
        sum += s->keepalive_pings;
    return sum;
  };
  // Ten periods at least: one Ping per period (at 3/4 of it at the
  // earliest) for the node, where a Ping per connection would be 8 times
  // as many.
  BOOST_REQUIRE(eventually([&] { return pings() >= 10; },
                           std::chrono::seconds(60 * timeout_scale())));
  auto first = pings();
  auto started = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(
      std::chrono::milliseconds{10 * pinging.keepalive_ms});
  auto periods = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - started)
                     .count()
                 / pinging.keepalive_ms;
  auto sent = pings() - first;
  BOOST_TEST_MESSAGE(n << " idle connections, " << periods
                       << " keepalive periods: " << sent << " Pings");
  BOOST_TEST(sent >= 1u);
  BOOST_TEST(sent <= 2 * (periods + 1)); // 8 x (periods - 1) with one each
  BOOST_TEST(!down_reason(w, std::chrono::seconds(0)));
  (*client)->close();
  (*server)->close();
}

BOOST_AUTO_TEST_SUITE_END()
