#define BOOST_TEST_MODULE node_actor
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/actor_cast.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>

#include "rdmactor/node.hpp"
#include "rdmactor/node_actor.hpp"
#include "test/actors/fixture.hpp"

#include <rdmactor/testing.hpp>

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

/// An actor system whose scheduler has `workers` threads.
struct sized_system {
  rdmactor::config cfg;
  caf::actor_system sys;

  explicit sized_system(int workers) : sys(init(cfg, workers)) {}

  static rdmactor::config& init(rdmactor::config& cfg, int workers) {
    cfg.set("scheduler.max-threads", workers);
    return cfg;
  }
};

std::string host() {
  return env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
}

node_actor spawn_or_fail(caf::actor_system& sys, const options& o) {
  auto nd = spawn_node(sys, o);
  BOOST_REQUIRE_MESSAGE(nd, render(nd));
  return *nd;
}

/// A TCP listener that never answers: a soft-fabric handshake with it waits
/// for the connect timeout.
struct silent_listener {
  int fd = -1;
  uint16_t port = 0;

  silent_listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0
        || ::listen(fd, 16) != 0
        || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("cannot make a silent listener");
    port = ntohs(a.sin_port);
  }

  ~silent_listener() {
    if (fd >= 0)
      ::close(fd);
  }
};

using ping_atom = caf::atom_constant<caf::atom("ping")>;

} // namespace

/// Two node actors in two actor systems: the server listens (its typed
/// acceptor is a scoped actor), the client connected to it through its
/// node actor; `conn` and `accepted` are the two ends.
struct node_actors {
  sized_system server_side{2};
  sized_system client_side{2};
  node_actor server;
  node_actor client;
  connection_actor conn;
  connection_actor accepted;

  node_actors() {
    auto o = test_options();
    server = spawn_or_fail(server_side.sys, o);
    client = spawn_or_fail(client_side.sys, o);
    caf::scoped_actor acceptor{server_side.sys};
    auto port = call<uint16_t>(server_side.sys, server, listen_atom::value,
                               host() + ":0",
                               caf::actor_cast<acceptor_actor>(acceptor));
    BOOST_REQUIRE_MESSAGE(port, render(port));
    auto c
        = call<connection_actor>(client_side.sys, client, connect_atom::value,
                                 host() + ":" + std::to_string(*port));
    BOOST_REQUIRE_MESSAGE(c, render(c));
    conn = std::move(*c);
    acceptor->receive(
        [&](accepted_atom, connection_actor& x) { accepted = std::move(x); },
        caf::after(std::chrono::seconds(10 * timeout_scale())) >> [] {});
    BOOST_REQUIRE(accepted);
  }
};

BOOST_AUTO_TEST_SUITE(node_actor_suite)

// Two node actors: one listens (a typed acceptor gets the peer), the other
// connects; the connection carries data both ways and stats answer.
BOOST_FIXTURE_TEST_CASE(connects_and_accepts_through_node_actors, node_actors) {
  auto src = call<local_mr>(client_side.sys, conn, alloc_local_mr_atom::value,
                            uint64_t{5}, uint64_t{8});
  BOOST_REQUIRE_MESSAGE(src, render(src));
  std::memcpy(src->data(), "hello", 5);
  auto sent
      = call<uint64_t>(client_side.sys, conn, send_data_atom::value, *src);
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  auto got
      = call<local_mr>(server_side.sys, accepted, receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(got, render(got));
  BOOST_TEST(
      std::string(reinterpret_cast<const char*>(got->data()), got->size())
      == "hello");
  auto stats
      = call<allocator_stats>(client_side.sys, client, stats_atom::value);
  BOOST_REQUIRE_MESSAGE(stats, render(stats));
  BOOST_TEST(stats->bytes_in_use >= 5u);
  // A bad address is an error value, not a hang.
  auto bad
      = call<connection_actor>(client_side.sys, client, connect_atom::value,
                               std::string{"no port here"});
  BOOST_REQUIRE(!bad);
  BOOST_TEST(code_of(bad.error()) == errc::invalid_address, render(bad));
  for (auto* sys : {&client_side.sys, &server_side.sys}) {
    auto& nd = sys == &client_side.sys ? client : server;
    auto closed = call<bool>(*sys, nd, close_atom::value);
    BOOST_REQUIRE_MESSAGE(closed, render(closed));
    BOOST_TEST(*closed);
  }
}

// The proof that connecting never blocks a worker: with a single
// CAF worker, a connect that waits (the peer never answers the handshake)
// leaves that worker free to run other actors.  Causal, not timed: the
// silent peer hangs up only after an actor on the same worker answered a
// ping; had the connect held the worker, the ping would have waited for
// the connect timeout, and the connect would have failed with it.
BOOST_AUTO_TEST_CASE(a_pending_connect_leaves_the_only_worker_free) {
  auto o = test_options();
  if (o.fabric != "soft") {
    BOOST_TEST_MESSAGE("soft only: a silent TCP listener does not stall an "
                       "rdma_cm connect");
    return;
  }
  o.connect_timeout_ms = 20000 * timeout_scale();
  silent_listener silent;
  sized_system one{1};
  auto client = spawn_or_fail(one.sys, o);
  caf::scoped_actor self{one.sys};
  // Both run on the single worker.
  auto pinger = one.sys.spawn([]() -> caf::behavior {
    return {[](ping_atom, int x) { return x + 1; }};
  });
  auto user = one.sys.spawn([client, to = caf::actor{self},
                             addr = "127.0.0.1:" + std::to_string(silent.port)](
                                caf::event_based_actor* u) -> caf::behavior {
    u->request(client, caf::infinite, connect_atom::value, addr)
        .then(
            [u, to](const connection_actor&) {
              u->send(to, std::string{"connected"});
            },
            [u, to](caf::error& err) { u->send(to, std::move(err)); });
    return {[](int) {}};
  });
  // The connect is pending once its TCP connection waits in the silent
  // listener's backlog.
  pollfd pending{silent.fd, POLLIN, 0};
  BOOST_REQUIRE(::poll(&pending, 1, 10000 * timeout_scale()) == 1);
  int answer = 0;
  self->request(pinger, std::chrono::seconds(60 * timeout_scale()),
                ping_atom::value, 41)
      .receive([&](int x) { answer = x; },
               [&](caf::error& err) {
                 BOOST_ERROR("ping failed: " << render(err));
               });
  BOOST_TEST(answer == 42);
  // Now the silent peer hangs up: the handshake fails at once.
  int fd = ::accept(silent.fd, nullptr, nullptr);
  BOOST_REQUIRE(fd >= 0);
  ::close(fd);
  caf::error connect_err;
  bool connected = false;
  self->receive([&](std::string&) { connected = true; },
                [&](caf::error& err) { connect_err = std::move(err); },
                caf::after(std::chrono::seconds(60 * timeout_scale())) >>
                    [] {});
  BOOST_TEST(!connected);
  BOOST_TEST(static_cast<bool>(connect_err));
  BOOST_TEST(code_of(connect_err) != errc::connect_timeout,
             render(connect_err));
  caf::anon_send_exit(user, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(pinger, caf::exit_reason::user_shutdown);
  auto closed = call<bool>(one.sys, client, close_atom::value);
  BOOST_TEST(static_cast<bool>(closed));
}

// Closing the node actor (or dropping its last handle) ends its
// connections; the peer's end learns it.
BOOST_FIXTURE_TEST_CASE(closing_the_node_actor_ends_its_connections,
                        node_actors) {
  caf::scoped_actor watcher{server_side.sys};
  watcher->monitor(accepted);
  caf::scoped_actor client_watcher{client_side.sys};
  client_watcher->monitor(conn);
  client_watcher->monitor(client);
  // The client's node goes with its last handle.
  client = node_actor{};
  size_t downs = 0;
  client_watcher->receive_for(downs, size_t{2})(
      [](caf::down_msg&) {},
      caf::after(std::chrono::seconds(10 * timeout_scale())) >> [] {});
  BOOST_TEST(downs == 2u);
  bool peer_down = false;
  watcher->receive([&](caf::down_msg&) { peer_down = true; },
                   caf::after(std::chrono::seconds(10 * timeout_scale())) >>
                       [] {});
  BOOST_TEST(peer_down);
  // A closed node actor is gone: a second close fails.
  auto closed = call<bool>(server_side.sys, server, close_atom::value);
  BOOST_REQUIRE_MESSAGE(closed, render(closed));
  auto again = call<bool>(server_side.sys, server, close_atom::value);
  BOOST_TEST(!again);
}

// Shutdown order: an actor system destroyed while its nodes are open
// (listening, with a connection) neither hangs nor leaks: the system's
// hook (loaded by rdmactor::config) closes the nodes, and the facades
// outlive the system (their calls fail with `closed`).
BOOST_AUTO_TEST_CASE(destroying_the_actor_system_closes_open_nodes) {
  std::unique_ptr<node> server;
  std::unique_ptr<node> client;
  std::string failure;
  std::promise<void> done;
  auto finished = done.get_future();
  // In a thread of its own so that a hang fails the case instead of the
  // whole suite (Boost.Test assertions stay in this thread).
  std::thread worker{[&] {
    {
      sized_system s{2};
      auto o = test_options();
      auto sv = node::open(s.sys, o);
      auto cl = node::open(s.sys, o);
      if (!sv || !cl) {
        failure = "open: " + render(!sv ? sv.error() : cl.error());
      } else {
        server = std::move(*sv);
        client = std::move(*cl);
        // Both ends go before the system, as actor handles do.
        connection_actor conn;
        connection_actor accepted;
        caf::scoped_actor acceptor{s.sys};
        auto port = server->listen(host() + ":0",
                                   caf::actor_cast<acceptor_actor>(acceptor));
        auto c = port ? client->connect(host() + ":" + std::to_string(*port))
                      : caf::expected<connection_actor>{port.error()};
        if (!c)
          failure = "listen/connect: " + render(c.error());
        else
          conn = std::move(*c);
        // Keep the server's end too: dropping it would close the
        // connection under the allocation below.
        acceptor->receive([&](accepted_atom,
                              connection_actor& x) { accepted = std::move(x); },
                          caf::after(std::chrono::seconds(10)) >> [] {});
        auto mr = call<local_mr>(s.sys, conn, alloc_local_mr_atom::value,
                                 uint64_t{64}, uint64_t{8});
        if (failure.empty() && !mr)
          failure = "alloc: " + render(mr.error());
      }
    } // ~actor_system with both nodes open (the server listening)
    done.set_value();
  }};
  if (finished.wait_for(std::chrono::seconds(60 * timeout_scale()))
      != std::future_status::ready) {
    BOOST_ERROR("~actor_system hung with open nodes");
    std::_Exit(1); // the worker thread cannot be joined
  }
  worker.join();
  BOOST_REQUIRE_MESSAGE(failure.empty(), failure);
  BOOST_TEST(server->closed());
  BOOST_TEST(client->closed());
  auto late = client->connect(host() + ":1");
  BOOST_REQUIRE(!late);
  BOOST_TEST(code_of(late.error()) == errc::closed, render(late.error()));
  // The allocation and the connections' memory returned with the close.
  BOOST_TEST(client->memory_stats().bytes_in_use == 0u);
  BOOST_TEST(server->memory_stats().bytes_in_use == 0u);
  client.reset();
  server.reset();
}

// send_data of bytes passed by value: one request each, for a string, a
// vector of std::byte, CAF 0.17's vector<char> byte buffer, nothing, more
// than one chunk, and with an immediate value; the copies return to the
// pool once the peer acknowledged them.
BOOST_FIXTURE_TEST_CASE(send_data_takes_bytes_in_one_request, node_actors) {
  auto& cs = client_side.sys;
  auto& ss = server_side.sys;
  auto received = [&]() -> std::string {
    auto got = call<local_mr>(ss, accepted, receive_data_atom_v);
    BOOST_REQUIRE_MESSAGE(got, render(got));
    return std::string(reinterpret_cast<const char*>(got->data()), got->size());
  };
  auto sent = call<uint64_t>(cs, conn, send_data_atom_v,
                             std::string{"sixteen bytes!!!"});
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  BOOST_TEST(*sent == 16u);
  BOOST_TEST(received() == "sixteen bytes!!!");
  std::vector<std::byte> bytes{std::byte{0}, std::byte{1}, std::byte{255}};
  sent = call<uint64_t>(cs, conn, send_data_atom_v, bytes);
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  BOOST_TEST(*sent == 3u);
  BOOST_TEST(received() == std::string("\x00\x01\xff", 3));
  sent
      = call<uint64_t>(cs, conn, send_data_atom_v, std::vector<char>{'o', 'k'});
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  BOOST_TEST(received() == "ok");
  sent = call<uint64_t>(cs, conn, send_data_atom_v, std::string{});
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  BOOST_TEST(*sent == 0u);
  BOOST_TEST(received().empty());
  // Larger than one message (4 KiB in the tests): chunks, in order.
  std::string big(10000, 'x');
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>('a' + i % 26);
  sent = call<uint64_t>(cs, conn, send_data_atom_v, big);
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  BOOST_TEST(*sent == big.size());
  std::string joined;
  while (joined.size() < big.size()) {
    auto part = received();
    BOOST_REQUIRE(!part.empty());
    joined += part;
  }
  BOOST_TEST(joined == big);
  // With an immediate value: the peer takes it with the chunk.
  sent = call<uint64_t>(cs, conn, send_data_atom_v,
                        std::vector<std::byte>{std::byte{7}}, uint32_t{42});
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  caf::scoped_actor self{ss};
  uint32_t imm = 0;
  std::string chunk;
  self->request(accepted, std::chrono::seconds(10 * timeout_scale()),
                receive_imm_atom_v)
      .receive(
          [&](uint32_t x, uint64_t, local_mr& mr) {
            imm = x;
            chunk.assign(reinterpret_cast<const char*>(mr.data()), mr.size());
          },
          [&](caf::error& err) { BOOST_ERROR(render(err)); });
  BOOST_TEST(imm == 42u);
  BOOST_TEST(chunk == std::string(1, '\x07'));
  // Every copy went back to the client's pool once acknowledged.
  BOOST_TEST(eventually([&] {
    auto st = call<allocator_stats>(cs, client, stats_atom_v);
    return st && st->bytes_in_use == 0;
  }));
}

// <rdmactor/testing.hpp> as users use it: the fixture connects two nodes
// (soft, or verbs with RDMACTOR_TEST_FABRIC=verbs), its calls answer, and
// every wait ends: a call nobody answers in time is an error value, a
// receive without a message returns false.
BOOST_FIXTURE_TEST_CASE(the_testing_fixture_connects_two_nodes,
                        rdmactor::testing::two_nodes) {
  BOOST_REQUIRE(client_conn);
  BOOST_REQUIRE(server_conn);
  BOOST_TEST(port != 0u);
  auto sent
      = call<uint64_t>(client_conn, send_data_atom_v, std::string{"fixture"});
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  BOOST_TEST(*sent == 7u);
  auto got = call<local_mr>(server_conn, receive_data_atom_v);
  BOOST_REQUIRE_MESSAGE(got, render(got));
  BOOST_TEST(
      std::string(reinterpret_cast<const char*>(got->data()), got->size())
      == "fixture");
  auto nothing = rdmactor::testing::call_within<local_mr>(
      sys, std::chrono::milliseconds{50}, server_conn, receive_data_atom_v);
  BOOST_TEST(!nothing);
  caf::scoped_actor self{sys};
  BOOST_TEST(!rdmactor::testing::receive_within(
      self, std::chrono::milliseconds{20}, [](int) {}));
  self->send(self, 3);
  int x = 0;
  BOOST_TEST(rdmactor::testing::receive_within(
      self, std::chrono::milliseconds{1000}, [&](int y) { x = y; }));
  BOOST_TEST(x == 3);
  BOOST_TEST(rdmactor::testing::eventually(
      [&] { return client->memory_stats().bytes_in_use == 0; }));
}

namespace {

template <class T, class = void>
struct has_public_state : std::false_type {};

template <class T>
struct has_public_state<T, std::void_t<decltype(std::declval<T>().state())>>
    : std::true_type {};

} // namespace

// The shared state of a remote_mr is the agent's business.
static_assert(!has_public_state<remote_mr>::value,
              "remote_mr::state() must not be public");

BOOST_AUTO_TEST_SUITE_END()
