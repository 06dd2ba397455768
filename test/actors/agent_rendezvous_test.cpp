#include <boost/test/unit_test.hpp>

// The agent suite `rendezvous`: receive buffers of the eager size and
// payloads above it read with RDMA READ, on the fabric
// RDMACTOR_TEST_FABRIC names (soft here, verbs in agent_test_verbs); the
// same protocol behaviour runs deterministically in
// test/actors/connection/agent_rendezvous_test.cpp.

#include <cstring>
#include <vector>

#include "common/tuning.hpp"
#include "rdmactor/transport/link_params.hpp"
#include "test/actors/agent_helpers.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

// -- receive buffers of the eager size, rendezvous above it -------------------

namespace {

/// 64 KiB messages over receive buffers of 4 KiB (the default eager size):
/// both nodes offer rendezvous.
options rendezvous_options() {
  auto o = test_options();
  o.max_message_len_bytes = 64 * 1024;
  o.eager_message_len_bytes = 4096;
  o.max_rendezvous_bytes = 64 * 1024; // pieces of 64 KiB
  o.recv_depth = 16;
  return o;
}

agent_stats stats_of(caf::actor_system& sys, const connection_actor& c) {
  auto s = call<agent_stats>(sys, c, stats_atom::value);
  BOOST_REQUIRE_MESSAGE(s, render(s));
  return *s;
}

/// A round trip each way, so that both Hellos have arrived (the first
/// frame of each side): afterwards send_data knows what the peer offers.
void exchange_hellos(two_nodes& t) {
  send_value(t.sys, t.client_conn, t.server_conn, 1, 0);
  send_value(t.sys, t.server_conn, t.client_conn, 2, 0);
}

/// Sends every buffer of `srcs` from `from` without waiting, collects the
/// bytes on `to` and checks they arrived intact and in order; returns the
/// number of chunks that carried them.
size_t send_all_and_check(two_nodes& t, const connection_actor& from,
                          const connection_actor& to,
                          const std::vector<local_mr>& srcs) {
  caf::scoped_actor self{t.sys};
  std::vector<uint8_t> want;
  for (auto& src : srcs) {
    want.insert(want.end(), src.data(), src.data() + src.size());
    self->send(from, send_data_atom::value, src);
  }
  std::vector<uint8_t> got;
  size_t chunks = 0;
  while (got.size() < want.size()) {
    auto chunk = call<local_mr>(t.sys, to, receive_data_atom::value);
    BOOST_REQUIRE_MESSAGE(chunk, render(chunk));
    got.insert(got.end(), chunk->data(), chunk->data() + chunk->size());
    ++chunks;
  }
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  BOOST_TEST(std::memcmp(got.data(), want.data(), want.size()) == 0);
  for (size_t i = 0; i < srcs.size(); ++i)
    self->receive([&](uint64_t n) { BOOST_TEST(n == srcs[i].size()); },
                  [&](caf::error& err) { BOOST_FAIL(render(err)); });
  return chunks;
}

} // namespace

BOOST_AUTO_TEST_SUITE(rendezvous)

// 1 MiB over 4 KiB receive buffers: the receiver reads it in 16 pieces of
// 64 KiB (its max-rendezvous-bytes) with RDMA READ; the bytes arrive intact,
// and once the user dropped them and the peer left, every byte allocated
// for them is back.
BOOST_AUTO_TEST_CASE(a_large_send_data_is_read_by_the_receiver_intact) {
  two_nodes t{rendezvous_options()};
  exchange_hellos(t);
  auto server_start = t.server->memory_stats().bytes_in_use;
  auto src = alloc(t, t.client_conn, 1 << 20);
  fill(src, 9);
  auto chunks = send_all_and_check(t, t.client_conn, t.server_conn, {src});
  BOOST_TEST(chunks == 16u);
  auto c = stats_of(t.sys, t.client_conn);
  auto s = stats_of(t.server_side.sys, t.server_conn);
  BOOST_TEST(c.rendezvous_sent == 16u);
  BOOST_TEST(s.rendezvous_read == 16u);
  BOOST_TEST(s.rendezvous_bytes == 0u);
  BOOST_TEST(s.queued_data_bytes == 0u);
  // The chunks are gone (dropped by send_all_and_check): their memory is
  // back.  (At most back: an unsignaled send of the Hello exchange may
  // have held its 8-byte payload at the start, until a later completion.)
  BOOST_TEST(eventually(
      [&] { return t.server->memory_stats().bytes_in_use <= server_start; }));
  // The peer leaves; nothing stays allocated for it.
  caf::anon_send_exit(t.client_conn, caf::exit_reason::user_shutdown);
  BOOST_TEST(
      eventually([&] { return t.server->memory_stats().bytes_in_use == 0u; }));
}

// Eager and rendezvous chunks, sent back to back, arrive in sending order
// (an eager chunk waits behind a chunk still being read).
BOOST_AUTO_TEST_CASE(eager_and_rendezvous_chunks_arrive_in_order) {
  two_nodes t{rendezvous_options()};
  exchange_hellos(t);
  std::vector<local_mr> srcs;
  uint8_t seed = 1;
  for (size_t size : {size_t{300 * 1024 + 7}, size_t{100}, size_t{5000},
                      size_t{3000}, size_t{64 * 1024}, size_t{1}}) {
    srcs.push_back(alloc(t, t.client_conn, size));
    fill(srcs.back(), seed++);
  }
  send_all_and_check(t, t.client_conn, t.server_conn, srcs);
  // And the other way round.
  std::vector<local_mr> back;
  for (size_t size : {size_t{10}, size_t{200 * 1024}, size_t{20}}) {
    back.push_back(alloc(t, t.server_conn, size));
    fill(back.back(), seed++);
  }
  send_all_and_check(t, t.server_conn, t.client_conn, back);
  BOOST_TEST(stats_of(t.sys, t.client_conn).rendezvous_read > 0u);
  BOOST_TEST(stats_of(t.server_side.sys, t.server_conn).rendezvous_read > 0u);
}

// A peer whose Hello does not offer rendezvous (eager size = max message
// length: buffers of the max, as before) gets SendData chunks that fit the
// negotiated buffers, and nothing is read from it.
BOOST_AUTO_TEST_CASE(a_peer_without_the_offer_gets_eager_chunks) {
  auto old_peer = rendezvous_options();
  old_peer.eager_message_len_bytes = old_peer.max_message_len_bytes;
  two_nodes t{old_peer, rendezvous_options()};
  exchange_hellos(t);
  auto src = alloc(t, t.server_conn, 1 << 20);
  fill(src, 4);
  auto chunks = send_all_and_check(t, t.server_conn, t.client_conn, {src});
  // The server's buffers are 4 KiB, so the connection's frames are.
  size_t per_chunk = 4096 - protocol::max_frame_overhead;
  BOOST_TEST(chunks == ((1u << 20) + per_chunk - 1) / per_chunk);
  BOOST_TEST(stats_of(t.server_side.sys, t.server_conn).rendezvous_sent == 0u);
  BOOST_TEST(stats_of(t.sys, t.client_conn).rendezvous_read == 0u);
  // The other way, the node without the offer still sends by rendezvous
  // to the one that offers it (64 KiB + 36 KiB), and reads nothing itself.
  auto back = alloc(t, t.client_conn, 100 * 1024);
  fill(back, 5);
  send_all_and_check(t, t.client_conn, t.server_conn, {back});
  BOOST_TEST(stats_of(t.sys, t.client_conn).rendezvous_sent == 2u);
  BOOST_TEST(stats_of(t.sys, t.client_conn).rendezvous_read == 0u);
}

namespace {

/// Bytes each of 4 more connections registers on the server, at the
/// default options but `shared_receive_queue`.
uint64_t registered_per_connection(bool shared) {
  options o;
  auto t_opts = test_options();
  o.fabric = t_opts.fabric;
  o.request_timeout_ms = t_opts.request_timeout_ms;
  o.connect_timeout_ms = t_opts.connect_timeout_ms;
  o.arena_size_bytes = t_opts.arena_size_bytes;
  o.shared_receive_queue = shared;
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
  // The server's ends register when their transports start (asynchronously
  // to the accept): wait for all of them (a connection registers at least
  // its first chunk of header slots).
  const uint64_t slots
      = uint64_t{tuning::header_slot_chunk} * transport::max_send_header_bytes;
  BOOST_TEST(eventually([&] {
    return connection_registrations(*t.server) - before >= more * slots;
  }));
  // Receive buffers come before a connection's header slots: wait a
  // little for an end still registering.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return (connection_registrations(*t.server) - before) / more;
}

} // namespace

// At the default options, connections share the device's receive buffers
// (shared-receive-queue): a connection registers its send-header slots and
// the slots for atomics' old values, nothing that grows with recv-depth.
// Without, each registers recv-depth receive buffers of the eager size
// (63 x 4160 B) on top, whatever max-message-len-bytes is.
BOOST_AUTO_TEST_CASE(registered_receive_memory_per_connection_is_bounded) {
  options o;
  BOOST_REQUIRE(o.shared_receive_queue);
  const uint64_t receive = uint64_t{o.recv_depth} * o.eager_message_len_bytes;
  const uint64_t slots = uint64_t{tuning::send_queue_depth(o.recv_depth)}
                         * (transport::max_send_header_bytes + 8);
  auto shared = registered_per_connection(true);
  BOOST_TEST_MESSAGE("registered per connection: " << shared
                                                   << " bytes (shared)");
  BOOST_TEST(shared <= slots);
  auto own = registered_per_connection(false);
  BOOST_TEST_MESSAGE("registered per connection: " << own << " bytes (own)");
  BOOST_TEST(receive <= 256u * 1024u);
  BOOST_TEST(own <= receive + slots);
  BOOST_TEST(own >= receive);
}

BOOST_AUTO_TEST_SUITE_END()
