#include <boost/test/unit_test.hpp>

// The agent suite `scale`: threads, registered memory and event loops
// with many connections.

#include <cstdlib>
#include <vector>

#include <dirent.h>

#include "test/actors/agent_helpers.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(scale)

namespace {

/// Threads of this process right now (entries of /proc/self/task).
size_t thread_count() {
  size_t n = 0;
  if (auto* dir = ::opendir("/proc/self/task")) {
    while (auto* ent = ::readdir(dir))
      if (ent->d_name[0] != '.')
        ++n;
    ::closedir(dir);
  }
  return n;
}

} // namespace

// The fabric's threads serve every connection of a device (engine-threads),
// so the process's thread count is CAF's workers plus a constant whatever
// the number of peers (issue 12: "threads with 1 vs 200 connected peers").
BOOST_AUTO_TEST_CASE(thread_count_does_not_grow_with_connections) {
  auto o = test_options();
  // Small receive pools: 200 connections on each side stay cheap to
  // register (verbs in the VM pins them).
  o.recv_depth = 4;
  o.max_message_len_bytes = 4096;
  const size_t peers = o.fabric == "soft" ? 200 : 16;
  two_nodes t{o};
  // One connection exists and works: the fabric's threads are started.
  auto rmr
      = call<remote_mr>(t.sys, t.client_conn, request_remote_mr_atom::value,
                        uint64_t{64}, uint64_t{8});
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  rmr = remote_mr{};
  auto with_one = thread_count();
  std::vector<connection_actor> clients{t.client_conn};
  std::vector<connection_actor> servers{t.server_conn};
  for (size_t i = 1; i < peers; ++i) {
    t.connect();
    clients.push_back(t.client_conn);
    servers.push_back(t.server_conn);
  }
  // Every connection works (the last one and one in the middle).
  for (auto idx : {peers / 2, peers - 1}) {
    auto r = call<remote_mr>(t.sys, clients[idx], request_remote_mr_atom::value,
                             uint64_t{64}, uint64_t{8});
    BOOST_REQUIRE_MESSAGE(r, "connection " << idx << ": " << render(r));
  }
  auto with_all = thread_count();
  BOOST_TEST_MESSAGE("threads with 1 connection: "
                     << with_one << ", with " << peers << ": " << with_all);
  BOOST_TEST(with_all <= with_one + 2);
}

// Issue 13: many peers on one node.  Every connection carries its own
// message both ways, and once the peers leave, the receive buffers and
// header slots of all of them are deregistered and the server's allocator
// is back where it started (counts, not timings).
BOOST_AUTO_TEST_CASE(hundreds_of_peers_each_answered_then_all_returned) {
  auto o = test_options();
  // The default 4 MiB of receive buffers per connection would be 4 GB here
  // (and pinned on verbs); the cost of a connection is not what this tests.
  o.recv_depth = 4;
  o.max_message_len_bytes = 4096;
  auto peers = static_cast<size_t>(std::strtoul(
      env_or("RDMACTOR_TEST_PEERS", o.fabric == "soft" ? "500" : "100").c_str(),
      nullptr, 10));
  two_nodes t{o};
  // The fixture's connection stays open throughout (the baseline).
  auto first_client = t.client_conn;
  auto first_server = t.server_conn;
  auto server_start = t.server->memory_stats().bytes_in_use;
  auto client_start = t.client->memory_stats().bytes_in_use;
  auto server_regs = connection_registrations(*t.server);
  auto client_regs = connection_registrations(*t.client);
  {
    std::vector<connection_actor> clients;
    std::vector<connection_actor> servers;
    for (size_t i = 0; i < peers; ++i) {
      t.connect();
      clients.push_back(t.client_conn);
      servers.push_back(t.server_conn);
    }
    // Each connection registers its header slots, and its receive buffers
    // unless the device shares them (shared-receive-queue).
    if (o.shared_receive_queue)
      BOOST_TEST(connection_registrations(*t.server) > server_regs);
    else
      BOOST_TEST(connection_registrations(*t.server) >= server_regs * peers);
    for (size_t i = 0; i < peers; ++i) {
      send_value(t.sys, clients[i], servers[i], 1000000 + i, i);
      send_value(t.sys, servers[i], clients[i], 2000000 + i, i);
    }
    // The clients go; each server end learns it from its peer.
    BOOST_TEST(end_clients_and_count_downs(t, clients, servers) == peers);
  }
  // Everything but the first connection's buffers returns.
  BOOST_TEST(eventually([&] {
    return t.server->memory_stats().bytes_in_use == server_start
           && t.client->memory_stats().bytes_in_use == client_start;
  }));
  BOOST_TEST(eventually([&] {
    return connection_registrations(*t.server) == server_regs
           && connection_registrations(*t.client) == client_regs;
  }));
  BOOST_TEST_MESSAGE("bytes registered by connections on the server: "
                     << server_regs << " with one, "
                     << connection_registrations(*t.server) << " after "
                     << peers << " more came and went");
  // The first connection still works.
  send_value(t.sys, first_client, first_server, 42, 0);
}

// engine-threads > 1 (soft): the device spreads its queue pairs over its
// loops and every connection works whichever loop serves it.
BOOST_AUTO_TEST_CASE(connections_work_on_every_event_loop) {
  auto o = test_options();
  o.recv_depth = 4;
  o.max_message_len_bytes = 4096;
  o.engine_threads = 3;
  two_nodes t{o};
  // Both ends are kept: a connection whose last handle goes closes.
  std::vector<connection_actor> clients{t.client_conn};
  std::vector<connection_actor> servers{t.server_conn};
  for (int i = 1; i < 7; ++i) {
    t.connect();
    clients.push_back(t.client_conn);
    servers.push_back(t.server_conn);
  }
  for (size_t i = 0; i < clients.size(); ++i) {
    auto r = call<remote_mr>(t.sys, clients[i], request_remote_mr_atom::value,
                             uint64_t{64}, uint64_t{8});
    BOOST_TEST(static_cast<bool>(r), "connection " << i << ": " << render(r));
  }
}

BOOST_AUTO_TEST_SUITE_END()
