#include <boost/test/unit_test.hpp>

// The agent suite `rendezvous`: the receive memory a connection registers
// (payloads above the eager size, read with RDMA READ:
// test/actors/connection/agent_rendezvous_test.cpp).

#include <vector>

#include "common/tuning.hpp"
#include "rdmactor/transport/link_params.hpp"
#include "test/actors/agent_helpers.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(rendezvous)

// At the default options, a connection registers recv-depth receive
// buffers of the eager size (64 x 4 KiB) plus its send-header slots (and
// the slots for atomics' old values), whatever max-message-len-bytes is.
BOOST_AUTO_TEST_CASE(registered_receive_memory_per_connection_is_bounded) {
  options o;
  auto t_opts = test_options();
  o.fabric = t_opts.fabric;
  o.request_timeout_ms = t_opts.request_timeout_ms;
  o.connect_timeout_ms = t_opts.connect_timeout_ms;
  o.arena_size_bytes = t_opts.arena_size_bytes;
  two_nodes t{o};
  auto before = connection_registrations(*t.server);
  const size_t more = 4;
  // Every end stays open, the fixture's first one too.
  std::vector<connection_actor> keep{t.client_conn, t.server_conn};
  for (size_t i = 0; i < more; ++i) {
    t.connect();
    keep.push_back(t.client_conn);
    keep.push_back(t.server_conn);
  }
  const uint64_t receive = uint64_t{o.recv_depth} * o.eager_message_len_bytes;
  const uint64_t slots = uint64_t{tuning::send_queue_depth(o.recv_depth)}
                         * (transport::max_send_header_bytes + 8);
  // The server's ends register when their transports start (asynchronously
  // to the accept): wait for all of them.
  BOOST_TEST(eventually([&] {
    return connection_registrations(*t.server) - before >= more * receive;
  }));
  auto per_connection = (connection_registrations(*t.server) - before) / more;
  BOOST_TEST_MESSAGE("registered per connection: " << per_connection
                                                   << " bytes");
  BOOST_TEST(receive <= 256u * 1024u);
  BOOST_TEST(per_connection <= receive + slots);
  BOOST_TEST(per_connection >= receive);
}

BOOST_AUTO_TEST_SUITE_END()
