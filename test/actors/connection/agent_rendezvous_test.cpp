#include <boost/test/unit_test.hpp>

// The suite `rendezvous_reads`: payloads above the eager size, read by
// the receiver with RDMA READ between two harnessed agents, in order with
// eager chunks; eager chunks only for a peer without the offer.

#include <cstring>
#include <memory>
#include <vector>

#include "protocol/codec.hpp"
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
  o.max_rendezvous_bytes = 64 * 1024; // pieces of 64 KiB
  o.recv_depth = 16;
  return o;
}

void fill(local_mr& mr, uint8_t seed) {
  for (size_t i = 0; i < mr.size(); ++i)
    mr.data()[i] = static_cast<uint8_t>(seed + i * 31);
}

/// Sends every buffer of `srcs` from `from` without waiting, collects the
/// bytes on `to` and checks they arrived intact and in order, and that
/// every send_data was answered with its size; returns the number of
/// chunks that carried them.
size_t send_all_and_check(agent_harness& h, const connection_actor& from,
                          const connection_actor& to,
                          const std::vector<local_mr>& srcs) {
  std::vector<uint8_t> want;
  std::vector<std::shared_ptr<pending_reply<uint64_t>>> answers;
  for (auto& src : srcs) {
    want.insert(want.end(), src.data(), src.data() + src.size());
    answers.push_back(h.ask<uint64_t>(from, send_data_atom::value, src));
  }
  std::vector<uint8_t> got;
  size_t chunks = 0;
  while (got.size() < want.size()) {
    auto chunk = h.call<local_mr>(to, receive_data_atom::value);
    BOOST_REQUIRE_MESSAGE(chunk, render(chunk));
    got.insert(got.end(), chunk->data(), chunk->data() + chunk->size());
    ++chunks;
  }
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  BOOST_TEST(std::memcmp(got.data(), want.data(), want.size()) == 0);
  h.settle();
  for (size_t i = 0; i < srcs.size(); ++i) {
    auto n = agent_harness::take(*answers[i]);
    BOOST_REQUIRE_MESSAGE(n, render(n));
    BOOST_TEST(*n == srcs[i].size());
  }
  return chunks;
}

} // namespace

// 1 MiB over 4 KiB receive buffers: the receiver reads it in 16 pieces of
// 64 KiB (its max-rendezvous-bytes) with RDMA READ; the bytes arrive intact,
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

// With the default max-rendezvous-bytes (1 MiB) the same 1 MiB goes in
// one piece: one rendezvous request, one READ, one chunk.
BOOST_AUTO_TEST_CASE(a_default_piece_reads_a_mebibyte_at_once) {
  auto o = rendezvous_options();
  o.max_rendezvous_bytes = options{}.max_rendezvous_bytes;
  agent_harness h{o};
  auto src = h.alloc(h.client_conn, 1 << 20);
  for (size_t i = 0; i < src.size(); ++i)
    src.data()[i] = static_cast<uint8_t>(3 + i * 7);
  auto sent = h.ask<uint64_t>(h.client_conn, send_data_atom::value, src);
  auto chunk = h.call<local_mr>(h.server_conn, receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(chunk, render(chunk));
  BOOST_REQUIRE_EQUAL(chunk->size(), src.size());
  BOOST_TEST(std::memcmp(chunk->data(), src.data(), src.size()) == 0);
  h.settle();
  auto n = agent_harness::take(*sent);
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_TEST(*n == src.size());
  BOOST_TEST(h.stats(h.client_conn).rendezvous_sent == 1u);
  BOOST_TEST(h.stats(h.server_conn).rendezvous_read == 1u);
}

// Eager and rendezvous chunks, sent back to back, arrive in sending order
// (an eager chunk waits behind a chunk still being read).
BOOST_AUTO_TEST_CASE(eager_and_rendezvous_chunks_arrive_in_order) {
  agent_harness h{rendezvous_options()};
  std::vector<local_mr> srcs;
  uint8_t seed = 1;
  for (size_t size : {size_t{300 * 1024 + 7}, size_t{100}, size_t{5000},
                      size_t{3000}, size_t{64 * 1024}, size_t{1}}) {
    srcs.push_back(h.alloc(h.client_conn, size));
    fill(srcs.back(), seed++);
  }
  send_all_and_check(h, h.client_conn, h.server_conn, srcs);
  // And the other way round.
  std::vector<local_mr> back;
  for (size_t size : {size_t{10}, size_t{200 * 1024}, size_t{20}}) {
    back.push_back(h.alloc(h.server_conn, size));
    fill(back.back(), seed++);
  }
  send_all_and_check(h, h.server_conn, h.client_conn, back);
  BOOST_TEST(h.stats(h.client_conn).rendezvous_read > 0u);
  BOOST_TEST(h.stats(h.server_conn).rendezvous_read > 0u);
}

// A peer whose Hello does not offer rendezvous (eager size = max message
// length) gets SendData chunks that fit the negotiated buffers, and
// nothing is read from it.
BOOST_AUTO_TEST_CASE(a_peer_without_the_offer_gets_eager_chunks) {
  auto old_peer = rendezvous_options();
  old_peer.eager_message_len_bytes = old_peer.max_message_len_bytes;
  agent_harness h{old_peer, rendezvous_options()};
  auto src = h.alloc(h.server_conn, 1 << 20);
  fill(src, 4);
  auto chunks = send_all_and_check(h, h.server_conn, h.client_conn, {src});
  // The server's buffers are 4 KiB, so the connection's frames are.
  size_t per_chunk = 4096 - protocol::max_frame_overhead;
  BOOST_TEST(chunks == ((1u << 20) + per_chunk - 1) / per_chunk);
  BOOST_TEST(h.stats(h.server_conn).rendezvous_sent == 0u);
  BOOST_TEST(h.stats(h.client_conn).rendezvous_read == 0u);
  // The other way, the side without the offer still sends by rendezvous
  // to the one that offers it (64 KiB + 36 KiB), and reads nothing itself.
  auto back = h.alloc(h.client_conn, 100 * 1024);
  fill(back, 5);
  send_all_and_check(h, h.client_conn, h.server_conn, {back});
  BOOST_TEST(h.stats(h.client_conn).rendezvous_sent == 2u);
  BOOST_TEST(h.stats(h.client_conn).rendezvous_read == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
