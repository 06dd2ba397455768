#include <boost/test/unit_test.hpp>

// The agent suite `node_lifecycle`: closing a node while peers connect
// and shutting its actor system down.

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "test/actors/fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(node_lifecycle)

namespace {

/// Keeps every connection it is handed (as an application's acceptor
/// does), so that a connection the node forgot would keep the server's
/// actor system from shutting down.
caf::behavior keeper(caf::stateful_actor<std::vector<connection_actor>>* self) {
  return {
      [self](accepted_atom, connection_actor& c) {
        self->state.push_back(std::move(c));
      },
  };
}

} // namespace

namespace {

/// Destroys `side`'s actor system; a watchdog turns a hang (an actor that
/// outlived node::close()) into a failure.  CAF wants a system destroyed by
/// the thread that made it, so the watchdog is the other thread.
void shut_down(std::unique_ptr<system_holder>& side, const char* which,
               int round) {
  std::atomic<bool> down{false};
  std::thread watchdog([&down, which, round] {
    auto until = std::chrono::steady_clock::now()
                 + std::chrono::seconds(30 * timeout_scale());
    while (!down && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!down) {
      std::fprintf(stderr,
                   "round %d: the %s's actor system did not shut down: a "
                   "connection outlived node::close()\n",
                   round, which);
      std::_Exit(1);
    }
  });
  side.reset();
  down = true;
  watchdog.join();
}

} // namespace

// Issue 16 item 4: close() took the connection list before it stopped the
// acceptor threads, and a connect() that was under way when close() ran
// added its connection after it; such a connection was never closed and
// ~actor_system waited forever.  Each round closes both nodes while
// connects are under way, then shuts each system down while the other
// side still holds its ends.
BOOST_AUTO_TEST_CASE(close_while_peers_connect_and_the_system_shuts_down) {
  auto o = test_options();
  o.recv_depth = 4;
  o.connect_timeout_ms = 1000 * timeout_scale();
  auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
  const int rounds = o.fabric == "soft" ? 30 : 4;
  for (int round = 0; round < rounds; ++round) {
    auto server_side = std::make_unique<system_holder>();
    auto client_side = std::make_unique<system_holder>();
    auto server = node::open(server_side->sys, o);
    auto client = node::open(client_side->sys, o);
    BOOST_REQUIRE_MESSAGE(server && client, "cannot open the nodes");
    auto acceptor = server_side->sys.spawn(keeper);
    auto port = (*server)->listen(host + ":0", acceptor);
    BOOST_REQUIRE_MESSAGE(port, render(port));
    auto where = host + ":" + std::to_string(*port);
    std::mutex mtx;
    std::vector<connection_actor> client_ends;
    std::atomic<bool> stop{false};
    std::atomic<int> connected{0};
    std::vector<std::thread> dialers;
    for (int i = 0; i < 3; ++i)
      dialers.emplace_back([&] {
        while (!stop) {
          auto c = (*client)->connect(where);
          if (!c)
            continue;
          std::lock_guard<std::mutex> guard{mtx};
          client_ends.push_back(std::move(*c));
          ++connected;
        }
      });
    // Close after a few connections, at a different point each round,
    // while the dialers are in the middle of their next connects.
    auto want = 1 + round % 4;
    BOOST_CHECK(eventually([&] { return connected >= want; }));
    (*client)->close();
    (*server)->close();
    stop = true;
    for (auto& d : dialers)
      d.join();
    // A closed node refuses new work with `closed`.
    auto late = (*client)->connect(where);
    BOOST_REQUIRE(!late);
    BOOST_TEST(code_of(late.error()) == errc::closed);
    auto relisten = (*server)->listen(host + ":0", acceptor);
    BOOST_REQUIRE(!relisten);
    BOOST_TEST(code_of(relisten.error()) == errc::closed);
    // The server's acceptor still holds the ends it was handed, the
    // dialers' vector the client's: each system must shut down anyway.
    client->reset();
    server->reset();
    shut_down(client_side, "client", round);
    client_ends.clear();
    caf::anon_send_exit(acceptor, caf::exit_reason::user_shutdown);
    acceptor = nullptr;
    shut_down(server_side, "server", round);
  }
}

BOOST_AUTO_TEST_SUITE_END()
