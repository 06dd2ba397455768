#include <boost/test/unit_test.hpp>

// The agent suite `shared_receives`: connections of a node that take their
// receives from one shared receive queue (shared-receive-queue=true, the
// default; transport/shared_receives.hpp).

#include <cstring>
#include <vector>

#include "common/tuning.hpp"
#include "rdmactor/transport/link_params.hpp"
#include "test/actors/agent_helpers.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(shared_receives)

// Forty peers, each answered both ways, cost the server no receive buffers
// of their own: its registrations grow by header slots only and return
// when they leave; the first connection still works.
BOOST_AUTO_TEST_CASE(peers_share_the_receive_buffers_and_leave_them) {
  auto o = test_options();
  o.shared_receive_queue = true;
  two_nodes t{o};
  auto first_client = t.client_conn;
  auto first_server = t.server_conn;
  send_value(t.sys, first_client, first_server, 1, 0);
  auto before = connection_registrations(*t.server);
  auto memory_before = t.server->memory_stats().bytes_in_use;
  // The node's shared buffers: at least the first chunk.
  BOOST_TEST(t.server->shared_receive_bytes()
             >= uint64_t{o.srq_chunk_receives} * receive_buffer_bytes(o));
  const size_t peers = 40;
  // What a connection registers besides receive buffers: its send-header
  // slots and the slots for atomics' old values.
  const uint64_t slots = uint64_t{tuning::send_queue_depth(o.recv_depth)}
                         * (transport::max_send_header_bytes + 8);
  {
    std::vector<connection_actor> clients;
    std::vector<connection_actor> servers;
    for (size_t i = 0; i < peers; ++i) {
      t.connect();
      clients.push_back(t.client_conn);
      servers.push_back(t.server_conn);
    }
    for (size_t i = 0; i < peers; ++i) {
      send_value(t.sys, clients[i], servers[i], 1000 + i, i);
      send_value(t.sys, servers[i], clients[i], 2000 + i, i);
    }
    auto grown = connection_registrations(*t.server) - before;
    BOOST_TEST_MESSAGE("registered for " << peers << " more peers: " << grown
                                         << " bytes");
    // Header slots only: no receive buffers of their own.
    BOOST_TEST(grown <= peers * slots);
    BOOST_TEST(end_clients_and_count_downs(t, clients, servers) == peers);
  }
  BOOST_TEST(eventually([&] {
    return connection_registrations(*t.server) == before
           && t.server->memory_stats().bytes_in_use == memory_before;
  }));
  send_value(t.sys, first_client, first_server, 42, 0);
  send_value(t.sys, first_server, first_client, 43, 0);
}

// A peer that sends far more than the shared queue holds, to a user who
// claims nothing yet, cannot starve another peer: its credits bound the
// receives it takes (recv-depth), the queue holds more than that, and
// every message of both arrives intact.
BOOST_AUTO_TEST_CASE(a_flooding_peer_does_not_starve_another) {
  auto o = test_options();
  o.shared_receive_queue = true;
  o.recv_depth = 16;
  o.srq_chunk_receives = 16;
  o.srq_max_receives = 48;
  two_nodes t{o};
  auto flood_client = t.client_conn;
  auto flood_server = t.server_conn;
  t.connect();
  auto quiet_client = t.client_conn;
  auto quiet_server = t.server_conn;
  const uint64_t messages = 200;
  for (uint64_t i = 0; i < messages; ++i) {
    auto src = call<local_mr>(t.sys, flood_client, alloc_local_mr_atom::value,
                              uint64_t{8}, uint64_t{8});
    BOOST_REQUIRE_MESSAGE(src, render(src));
    auto value = 5000 + i;
    std::memcpy(src->data(), &value, 8);
    auto sent
        = call<uint64_t>(t.sys, flood_client, send_data_atom::value, *src);
    BOOST_REQUIRE_MESSAGE(sent, "message " << i << ": " << render(sent));
  }
  // The other peer gets through at once, both ways.
  send_value(t.sys, quiet_client, quiet_server, 77, 1);
  send_value(t.sys, quiet_server, quiet_client, 78, 1);
  // Nothing of the flood was lost or reordered.
  for (uint64_t i = 0; i < messages; ++i) {
    auto got = call<local_mr>(t.sys, flood_server, receive_data_atom::value);
    BOOST_REQUIRE_MESSAGE(got, "message " << i << ": " << render(got));
    BOOST_REQUIRE_EQUAL(got->size(), 8u);
    uint64_t x = 0;
    std::memcpy(&x, got->data(), 8);
    BOOST_REQUIRE_EQUAL(x, 5000 + i);
  }
}

// Without shared receives each connection registers its own (the option
// is honoured both ways).
BOOST_AUTO_TEST_CASE(without_shared_receives_a_connection_has_its_own) {
  auto o = test_options();
  o.shared_receive_queue = false;
  two_nodes t{o};
  BOOST_TEST(t.server->shared_receive_bytes() == 0u);
  auto before = connection_registrations(*t.server);
  std::vector<connection_actor> keep{t.client_conn, t.server_conn};
  t.connect();
  keep.push_back(t.client_conn);
  keep.push_back(t.server_conn);
  send_value(t.sys, t.client_conn, t.server_conn, 9, 1);
  const uint64_t own = uint64_t{o.recv_depth} * receive_buffer_bytes(o);
  BOOST_TEST(eventually(
      [&] { return connection_registrations(*t.server) - before >= own; }));
}

BOOST_AUTO_TEST_SUITE_END()
