// node::remote_actor and node::listen without an acceptor: CAF io's
// publish / remote_actor in one call each.  Part of remote_actors_test
// (soft, and verbs through test/verbs/CMakeLists.txt).

#include <boost/test/unit_test.hpp>

#include <caf/typed_event_based_actor.hpp>

#include "test/actors/remote_actors_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

using multiplier
    = caf::typed_actor<caf::replies_to<int32_t, int32_t>::with<int32_t>>;
using divider = caf::typed_actor<caf::replies_to<double, double>::with<double>>;

multiplier::behavior_type multiply() {
  return {[](int32_t a, int32_t b) { return a * b; }};
}

/// A server node that listens without an acceptor and publishes
/// `multiply` as "mul", and a client node.
struct publishing_nodes {
  remote_system client_side{true};
  remote_system server_side{false};
  std::unique_ptr<node> server;
  std::unique_ptr<node> client;
  std::string addr;

  publishing_nodes() {
    auto s = node::open(server_side.sys, test_options());
    auto c = node::open(client_side.sys, test_options());
    BOOST_REQUIRE_MESSAGE(s && c, "cannot open nodes");
    server = std::move(*s);
    client = std::move(*c);
    auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
    auto port = server->listen(host + ":0");
    BOOST_REQUIRE_MESSAGE(port, render(port));
    addr = host + ":" + std::to_string(*port);
    auto pub = server->publish(
        "mul", caf::actor_cast<caf::actor>(server_side.sys.spawn(multiply)));
    BOOST_REQUIRE_MESSAGE(pub, render(pub));
  }

  ~publishing_nodes() {
    client->close();
    server->close();
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(remote_actor_connects_looks_up_and_keeps_the_connection) {
  publishing_nodes t;
  auto typed = t.client->remote_actor<multiplier>(t.addr, "mul");
  BOOST_REQUIRE_MESSAGE(typed, render(typed));
  auto product = call<int32_t>(t.client_side.sys, *typed, 6, 7);
  BOOST_REQUIRE_MESSAGE(product, render(product));
  BOOST_TEST(*product == 42);
  // The same connection again: the same proxy.
  auto again = t.client->remote_actor(t.addr, "mul");
  BOOST_REQUIRE_MESSAGE(again, render(again));
  BOOST_TEST((*again == caf::actor_cast<caf::actor>(*typed)));
  // Errors name the cause.
  auto unknown = t.client->remote_actor(t.addr, "nobody");
  BOOST_REQUIRE(!unknown);
  BOOST_TEST(code_of(unknown.error()) == errc::unknown_actor,
             render(unknown.error()));
  auto wrong = t.client->remote_actor<divider>(t.addr, "mul");
  BOOST_REQUIRE(!wrong);
  BOOST_TEST(code_of(wrong.error()) == errc::invalid_argument,
             render(wrong.error()));
  // Handles dropped: the node still keeps the connection and the server
  // its accepted end.
  *typed = nullptr;
  *again = nullptr;
  auto later = t.client->remote_actor<multiplier>(t.addr, "mul");
  BOOST_REQUIRE_MESSAGE(later, render(later));
  auto p2 = call<int32_t>(t.client_side.sys, *later, 3, 5);
  BOOST_REQUIRE_MESSAGE(p2, render(p2));
  BOOST_TEST(*p2 == 15);
}

BOOST_AUTO_TEST_CASE(remote_actor_after_the_server_went_says_why) {
  publishing_nodes t;
  auto proxy = t.client->remote_actor(t.addr, "mul");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  t.server->close();
  // The kept connection ended: remote_actor connects again, and that
  // fails with the connect error (nobody listens any more).
  auto r = t.client->remote_actor(t.addr, "mul");
  BOOST_REQUIRE(!r);
  BOOST_TEST_MESSAGE("after the server went: " << render(r.error()));
  auto code = code_of(r.error());
  BOOST_TEST((code == errc::connect_failed || code == errc::connect_timeout
              || code == errc::peer_gone || code == errc::peer_closed),
             render(r.error()));
}

BOOST_AUTO_TEST_CASE(remote_actor_on_a_closed_node_is_closed) {
  publishing_nodes t;
  t.client->close();
  auto r = t.client->remote_actor(t.addr, "mul");
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::closed, render(r.error()));
  auto p = t.client->listen("127.0.0.1:0");
  BOOST_REQUIRE(!p);
  BOOST_TEST(code_of(p.error()) == errc::closed, render(p.error()));
}
