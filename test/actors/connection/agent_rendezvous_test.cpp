#include <boost/test/unit_test.hpp>

// The suite `rendezvous_reads`: payloads above the eager size, read by
// the receiver with RDMA READ between two harnessed agents.

#include <cstring>
#include <vector>

#include "test/support/agent_harness.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(rendezvous_reads)

namespace {

/// 64 KiB messages over receive buffers of 4 KiB: both sides offer
/// rendezvous.
options rendezvous_options() {
  auto o = harness_options();
  o.max_message_len_bytes = 64 * 1024;
  o.eager_message_len_bytes = 4096;
  o.recv_depth = 16;
  return o;
}

} // namespace

// 1 MiB over 4 KiB receive buffers: the receiver reads it in 16 pieces of
// 64 KiB (its max message length) with RDMA READ; the bytes arrive intact,
// and once the user dropped them and the peer left, every byte allocated
// for them is back.
BOOST_AUTO_TEST_CASE(a_large_send_data_is_read_by_the_receiver_intact) {
  agent_harness h{rendezvous_options()};
  auto server_start = h.server.bytes_in_use();
  auto src = h.alloc(h.client_conn, 1 << 20);
  for (size_t i = 0; i < src.size(); ++i)
    src.data()[i] = static_cast<uint8_t>(9 + i * 31);
  auto sent = h.ask<uint64_t>(h.client_conn, send_data_atom::value, src);
  std::vector<uint8_t> got;
  size_t chunks = 0;
  while (got.size() < src.size()) {
    auto chunk = h.call<local_mr>(h.server_conn, receive_data_atom::value);
    BOOST_REQUIRE_MESSAGE(chunk, render(chunk));
    got.insert(got.end(), chunk->data(), chunk->data() + chunk->size());
    ++chunks;
  }
  BOOST_REQUIRE_EQUAL(got.size(), src.size());
  BOOST_TEST(std::memcmp(got.data(), src.data(), src.size()) == 0);
  h.settle();
  auto n = agent_harness::take(*sent);
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_TEST(*n == src.size());
  BOOST_TEST(chunks == 16u);
  auto c = h.stats(h.client_conn);
  auto s = h.stats(h.server_conn);
  BOOST_TEST(c.rendezvous_sent == 16u);
  BOOST_TEST(s.rendezvous_read == 16u);
  BOOST_TEST(s.rendezvous_bytes == 0u);
  BOOST_TEST(s.queued_data_bytes == 0u);
  // The chunks are gone: their memory is back.
  BOOST_TEST(h.server.bytes_in_use() <= server_start);
  // The peer leaves; nothing stays allocated for it.
  caf::anon_send_exit(h.client_conn, caf::exit_reason::user_shutdown);
  h.settle();
  BOOST_TEST(h.server.bytes_in_use() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
