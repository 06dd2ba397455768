// agent_core_test: SendData from the peer and the acknowledgements of
// SendData, gathered or riding on our own SendData.

#include <boost/test/unit_test.hpp>

#include "test/actors/core/agent_core_fixture.hpp"

// -- SendData from the peer and its acknowledgements --------------------------

BOOST_FIXTURE_TEST_SUITE(send_data_in, fixture)

BOOST_AUTO_TEST_CASE(send_data_over_peer_max_queued_bytes_is_refused) {
  std::string chunk(600, 'x');
  receive(pb::make_send_data(1, chunk.size()), chunk);
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  BOOST_REQUIRE(out.data.size() == 1u);
  BOOST_TEST(std::memcmp(out.data[0].data(), chunk.data(), chunk.size()) == 0);
  receive(pb::make_send_data(2, chunk.size()), chunk); // 1200 > 1000
  BOOST_TEST(last_response().request_id() == 2u);
  BOOST_TEST(pb::status_of(last_response()) == pb::QUOTA_EXCEEDED);
  BOOST_TEST(out.data.size() == 1u);
  out.queued_bytes = 0; // the user claimed the first chunk
  receive(pb::make_send_data(3, chunk.size()), chunk);
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  BOOST_TEST(out.data.size() == 2u);
}

BOOST_AUTO_TEST_CASE(received_chunks_are_copied_once_half_the_pool_is_held) {
  // A zero-copy chunk views its frame behind the header (not 64-aligned);
  // a copy is an allocation of its own (64-aligned).
  auto zero_copy = [](const local_mr& chunk) { return chunk.addr() % 64 != 0; };
  for (uint64_t id = 1; id <= recv_depth; ++id)
    receive(pb::make_send_data(id, 3), "abc");
  BOOST_REQUIRE(out.data.size() == recv_depth);
  for (size_t i = 0; i < out.data.size(); ++i) {
    BOOST_TEST(std::memcmp(out.data[i].data(), "abc", 3) == 0);
    BOOST_TEST(zero_copy(out.data[i]) == (i < recv_depth / 2));
  }
  // Users let go of the views: zero copy again.
  out.data.clear();
  out.queued_bytes = 0;
  receive(pb::make_send_data(100, 3), "abc");
  BOOST_REQUIRE(out.data.size() == 1u);
  BOOST_TEST(zero_copy(out.data[0]));
}

BOOST_AUTO_TEST_CASE(without_the_offer_each_chunk_gets_its_response) {
  for (uint64_t id = 1; id <= 3; ++id)
    receive(pb::make_send_data(id, 1), "z");
  BOOST_REQUIRE(out.posted.size() == 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    auto& res = out.posted[i].msg.response();
    BOOST_TEST(res.request_id() == i + 1);
    BOOST_TEST(res.send_data().also_acked_size() == 0);
  }
  BOOST_TEST(out.ack_flushes == 0);
}

BOOST_AUTO_TEST_CASE(with_the_offer_acks_gather_until_the_flush) {
  receive(hello(pb::protocol_version, true));
  constexpr uint64_t n = 5;
  for (uint64_t id = 1; id <= n; ++id)
    receive(pb::make_send_data(id, 1), "z");
  BOOST_TEST(out.posted.empty());
  BOOST_TEST(out.ack_flushes == 1); // asked once
  core->data().flush_acks();
  BOOST_REQUIRE(out.posted.size() == 1u);
  auto& res = last_response();
  BOOST_TEST(res.request_id() == 1u);
  BOOST_TEST(pb::status_of(res) == pb::OK);
  BOOST_REQUIRE(res.send_data().also_acked_size() == static_cast<int>(n - 1));
  for (int i = 0; i < static_cast<int>(n - 1); ++i)
    BOOST_TEST(res.send_data().also_acked(i) == static_cast<uint64_t>(i + 2));
  BOOST_TEST(core->stats().merged_acks_sent == n - 1);
  core->data().flush_acks(); // nothing left
  BOOST_TEST(out.posted.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_full_cumulative_response_goes_at_once) {
  receive(hello(pb::protocol_version, true));
  constexpr auto n = tuning::max_acks_per_response;
  for (uint64_t id = 1; id <= n; ++id)
    receive(pb::make_send_data(id, 0));
  BOOST_REQUIRE(out.posted.size() == 1u); // without a flush
  BOOST_TEST(last_response().send_data().also_acked_size()
             == static_cast<int>(n - 1));
  receive(pb::make_send_data(n + 1, 0));
  BOOST_TEST(out.posted.size() == 1u);
  BOOST_TEST(out.ack_flushes == 2); // the first flush is still asked for
  core->data().flush_acks();
  BOOST_REQUIRE(out.posted.size() == 2u);
  BOOST_TEST(last_response().request_id() == n + 1);
  BOOST_TEST(last_response().send_data().also_acked_size() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

// -- acknowledgements on SendData (EXT_PIGGYBACK_ACKS) ------------------------

namespace {

/// A Hello that offers cumulative acks and, if `ride`, acks on SendData.
pb::Message piggyback_hello(bool ride) {
  auto h = hello(pb::protocol_version, true);
  if (ride)
    h.mutable_hello()->set_extensions(pb::EXT_PIGGYBACK_ACKS);
  return h;
}

} // namespace

/// The fixture, plus our own send_data of `len` bytes (answer ignored).
struct piggyback_fixture : fixture {
  void send_ours(size_t len) {
    auto mr = pool->allocate(len, 64, transport::access::all);
    BOOST_REQUIRE(mr);
    core->data().send(*mr, t0, [](caf::expected<uint64_t>) {});
  }
};

BOOST_FIXTURE_TEST_SUITE(piggybacked_acks, piggyback_fixture)

BOOST_AUTO_TEST_CASE(our_hello_offers_acks_on_send_data) {
  BOOST_TEST((our_hello().extensions() & pb::EXT_PIGGYBACK_ACKS) != 0u);
}

BOOST_AUTO_TEST_CASE(gathered_acks_ride_on_our_next_send_data) {
  receive(piggyback_hello(true));
  receive(pb::make_send_data(1, 1), "a");
  receive(pb::make_send_data(2, 1), "b");
  BOOST_TEST(out.posted.empty());
  BOOST_TEST(out.ack_flushes == 1);
  BOOST_TEST(core->data().acks_may_ride());
  send_ours(8);
  BOOST_REQUIRE(out.posted.size() == 1u);
  auto& sd = out.posted[0].msg.request().send_data();
  BOOST_REQUIRE(sd.acked_size() == 2);
  BOOST_TEST(sd.acked(0) == 1u);
  BOOST_TEST(sd.acked(1) == 2u);
  BOOST_TEST(out.posted[0].payload.size() == 8u);
  BOOST_TEST(core->stats().piggybacked_acks_sent == 2u);
  BOOST_TEST(!core->data().acks_may_ride());
  // The flush the owner still runs finds nothing to send.
  core->data().flush_acks();
  BOOST_TEST(out.posted.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_full_chunk_leaves_the_acks_to_the_flush) {
  receive(piggyback_hello(true));
  receive(pb::make_send_data(1, 1), "a");
  auto chunk_max = max_message_len - pb::max_frame_overhead;
  send_ours(chunk_max);
  BOOST_REQUIRE(out.posted.size() == 1u);
  BOOST_TEST(out.posted[0].msg.request().send_data().acked_size() == 0);
  BOOST_TEST(core->data().acks_may_ride());
  core->data().flush_acks();
  BOOST_REQUIRE(out.posted.size() == 2u);
  BOOST_TEST(last_response().request_id() == 1u);
  // Room for some: as many as fit ride, the rest waits for the flush.
  for (uint64_t id = 2; id <= 5; ++id)
    receive(pb::make_send_data(id, 1), "z");
  auto room = pb::piggyback_ack_overhead(2);
  send_ours(chunk_max - room);
  BOOST_REQUIRE(out.posted.size() == 3u);
  BOOST_TEST(out.posted[2].msg.request().send_data().acked_size() == 2);
  core->data().flush_acks();
  BOOST_REQUIRE(out.posted.size() == 4u);
  BOOST_TEST(last_response().request_id() == 4u);
  BOOST_TEST(last_response().send_data().also_acked_size() == 1);
}

// A chunk refused before it goes out (here: too many requests pending)
// takes no acknowledgements with it: the flush still answers them.
BOOST_AUTO_TEST_CASE(a_refused_chunk_leaves_the_acks_to_the_flush) {
  opts.peer_max_pending_requests = 1;
  make_core();
  receive(piggyback_hello(true));
  outcome first;
  pending_send_data(first); // the one request the quota allows
  receive(pb::make_send_data(1, 1), "a");
  BOOST_REQUIRE(core->data().acks_may_ride());
  auto mr = pool->allocate(8, 64, transport::access::all);
  BOOST_REQUIRE(mr);
  caf::expected<uint64_t> got{uint64_t{0}};
  core->data().send(*mr, t0, [&](caf::expected<uint64_t> r) { got = r; });
  BOOST_REQUIRE(!got);
  BOOST_TEST(code_of(got.error()) == errc::quota_exceeded);
  BOOST_TEST(out.posted.size() == 1u); // the first request only
  BOOST_TEST(core->data().acks_may_ride());
  BOOST_TEST(core->stats().piggybacked_acks_sent == 0u);
  core->data().flush_acks();
  BOOST_REQUIRE(out.posted.size() == 2u);
  BOOST_TEST(last_response().request_id() == 1u);
}

BOOST_AUTO_TEST_CASE(without_the_offer_acks_get_a_response) {
  receive(piggyback_hello(false));
  receive(pb::make_send_data(1, 1), "a");
  BOOST_TEST(!core->data().acks_may_ride());
  send_ours(8);
  BOOST_REQUIRE(out.posted.size() == 1u);
  BOOST_TEST(out.posted[0].msg.request().send_data().acked_size() == 0);
  core->data().flush_acks();
  BOOST_REQUIRE(out.posted.size() == 2u);
  BOOST_TEST(last_response().request_id() == 1u);
  BOOST_TEST(core->stats().piggybacked_acks_sent == 0u);
}

BOOST_AUTO_TEST_CASE(acks_on_the_peers_send_data_complete_our_requests) {
  outcome a, b, c;
  auto ia = pending_send_data(a);
  auto ib = pending_send_data(b);
  pending_send_data(c);
  auto msg = pb::make_send_data(77, 3);
  auto* sd = msg.mutable_request()->mutable_send_data();
  sd->add_acked(ia);
  sd->add_acked(ib);
  sd->add_acked(12345); // not ours
  receive(msg, "xyz");
  BOOST_TEST(a.called);
  BOOST_TEST(!a.err);
  BOOST_TEST(b.called);
  BOOST_TEST(!b.err);
  BOOST_TEST(!c.called);
  BOOST_TEST(core->stats().piggybacked_acks_received == 2u);
  BOOST_TEST(core->stats().protocol_errors == 1u);
  // The SendData that carried them is served as usual.
  BOOST_REQUIRE(out.data.size() == 1u);
  BOOST_TEST(out.data[0].size() == 3u);
}

BOOST_AUTO_TEST_CASE(too_many_acks_on_a_send_data_complete_nothing) {
  outcome a;
  auto ia = pending_send_data(a);
  auto msg = pb::make_send_data(77, 1);
  auto* sd = msg.mutable_request()->mutable_send_data();
  for (size_t i = 0; i <= tuning::max_acks_per_response; ++i)
    sd->add_acked(ia);
  receive(msg, "x");
  BOOST_TEST(!a.called);
  BOOST_TEST(core->stats().protocol_errors == 1u);
  BOOST_TEST(core->stats().piggybacked_acks_received == 0u);
  BOOST_REQUIRE(out.data.size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
