// agent_core_test: actor messages by rendezvous.

#include <boost/test/unit_test.hpp>

#include "test/actors/core/agent_core_rendezvous_fixture.hpp"

// -- rendezvous actor messages (issue 14) -------------------------------------

BOOST_FIXTURE_TEST_SUITE(actor_rendezvous, actor_rendezvous_fixture)

BOOST_AUTO_TEST_CASE(offered_with_remote_actors_and_rendezvous_only) {
  core->start();
  auto ext = out.posted.front().msg.hello().extensions();
  BOOST_TEST((ext & pb::EXT_ACTOR_RENDEZVOUS) != 0u);
  opts.remote_actors = false;
  make_core();
  out.posted.clear();
  core->start();
  ext = out.posted.front().msg.hello().extensions();
  BOOST_TEST((ext & pb::EXT_ACTOR_RENDEZVOUS) == 0u);
  opts.remote_actors = true;
  opts.eager_message_len_bytes = opts.max_message_len_bytes;
  make_core();
  out.posted.clear();
  core->start();
  ext = out.posted.front().msg.hello().extensions();
  BOOST_TEST((ext & pb::EXT_ACTOR_RENDEZVOUS) == 0u);
}

// One header-only request names a copy of the serialization in memory
// registered for the peer's READ; the peer's answer frees it.
BOOST_AUTO_TEST_CASE(a_large_message_goes_in_one_request_to_a_peer_that_reads) {
  peer_hello(true);
  auto before = pool->stats().bytes_in_use;
  std::string data(10000, 'x');
  data[9999] = 'y';
  BOOST_REQUIRE(!core->actors().post(5, 6, 7, data.data(), data.size(), false));
  BOOST_REQUIRE_EQUAL(out.posted.size(), 1u);
  auto& f = out.posted.front();
  BOOST_REQUIRE(f.msg.has_request());
  BOOST_REQUIRE(f.msg.request().has_actor_message());
  auto& m = f.msg.request().actor_message();
  BOOST_TEST(!f.payload.valid());
  BOOST_TEST(m.target() == 5u);
  BOOST_TEST(m.sender() == 6u);
  BOOST_TEST(m.message_id() == 7u);
  BOOST_TEST(m.len() == 10000u);
  BOOST_TEST(m.total_len() == 0u);
  BOOST_REQUIRE(m.has_source());
  BOOST_TEST(m.source().len() == 10000u);
  auto* copy = reinterpret_cast<const char*>(m.source().addr());
  BOOST_TEST(std::string(copy, 10000) == data);
  BOOST_TEST(pool->stats().bytes_in_use > before);
  BOOST_TEST(core->stats().rendezvous_sent == 1u);
  receive(
      pb::make_send_data_response(f.msg.request().request_id(), pb::OK, {}));
  BOOST_TEST(core->stats().pending_requests == 0u);
  BOOST_TEST(pool->stats().bytes_in_use == before);
}

BOOST_AUTO_TEST_CASE(a_peer_without_the_offer_gets_chunks) {
  peer_hello(false);
  std::string data(10000, 'x');
  BOOST_REQUIRE(!core->actors().post(5, 6, 7, data.data(), data.size(), false));
  BOOST_TEST(out.posted.size() == 3u); // 4096-byte frames
  for (auto& f : out.posted)
    BOOST_TEST(f.msg.has_actor_message());
  BOOST_TEST(core->stats().rendezvous_sent == 0u);
}

// Actor messages after one being read wait for it: the target's actors
// see them in sending order.
BOOST_AUTO_TEST_CASE(eager_messages_wait_behind_one_being_read) {
  auto before = pool->stats().bytes_in_use;
  receive(actor_rendezvous(1, 0x10000, 8000, 8000));
  BOOST_REQUIRE_EQUAL(out.reads.size(), 1u);
  BOOST_TEST(out.reads[0].src.addr == 0x10000u);
  BOOST_TEST(out.reads[0].src.len == 8000u);
  BOOST_TEST(out.reads[0].src.rkey == 9u);
  BOOST_TEST(out.reads[0].dst.size() == 8000u);
  receive(actor_eager(3), "abc");
  BOOST_TEST(out.actor_frames.empty());
  BOOST_TEST(answers().empty());
  BOOST_TEST(core->stats().rendezvous_bytes == 8003u);
  std::memset(out.reads[0].dst.data(), 0x5a, 8000);
  out.reads[0].done(caf::error{});
  BOOST_REQUIRE_EQUAL(out.actor_frames.size(), 2u);
  auto& big = out.actor_frames[0];
  BOOST_TEST(!big.refused);
  BOOST_TEST(big.head.len() == 8000u);
  BOOST_TEST(big.head.target() == 5u);
  BOOST_TEST(big.head.message_id() == 7u);
  BOOST_TEST(!big.head.has_source());
  BOOST_TEST(big.bytes == std::string(8000, '\x5a'));
  BOOST_TEST(out.actor_frames[1].bytes == "abc");
  auto a = answers();
  BOOST_REQUIRE_EQUAL(a.size(), 1u);
  BOOST_TEST(a[0].first == 1u);
  BOOST_TEST(a[0].second == pb::OK);
  auto s = core->stats();
  BOOST_TEST(s.rendezvous_read == 1u);
  BOOST_TEST(s.rendezvous_bytes == 0u);
  out.reads.clear();
  BOOST_TEST(pool->stats().bytes_in_use == before);
  // Nothing waits now: the next eager message goes straight through.
  receive(actor_eager(2), "ok");
  BOOST_REQUIRE_EQUAL(out.actor_frames.size(), 3u);
}

// A READ that fails is answered with an error and refused in its turn (so
// a request among it fails to its sender and its credit is counted).
BOOST_AUTO_TEST_CASE(a_failed_read_is_refused_in_order) {
  receive(actor_rendezvous(1, 0x10000, 5000, 5000));
  receive(actor_eager(2), "ok");
  BOOST_REQUIRE_EQUAL(out.reads.size(), 1u);
  out.reads[0].done(make_error(errc::remote_access_error, "bad rkey"));
  BOOST_REQUIRE_EQUAL(out.actor_frames.size(), 2u);
  BOOST_TEST(out.actor_frames[0].refused);
  BOOST_TEST(out.actor_frames[0].head.len() == 5000u);
  BOOST_TEST(!out.actor_frames[1].refused);
  BOOST_TEST(out.actor_frames[1].bytes == "ok");
  auto a = answers();
  BOOST_REQUIRE_EQUAL(a.size(), 1u);
  BOOST_TEST(a[0].second == pb::UNKNOWN_TOKEN);
  BOOST_TEST(core->stats().rendezvous_bytes == 0u);
}

// Hostile rendezvous frames: answered with an error status, never read,
// counted as violations; one over our limit is refused to its sender.
BOOST_AUTO_TEST_CASE(hostile_rendezvous_messages_are_refused_without_reading) {
  opts.actor_max_message_bytes = 50000;
  opts.peer_max_violations = 100;
  make_core();
  receive(actor_rendezvous(1, 0x10000, 100, 100));   // fits an eager frame
  receive(actor_rendezvous(2, 0x10000, 8000, 7000)); // token disagrees
  auto no_source = actor_rendezvous(3, 0x10000, 8000, 8000);
  no_source.mutable_request()->mutable_actor_message()->clear_source();
  receive(no_source);
  receive(actor_rendezvous(4, ~uint64_t{0} - 10, 8000, 8000)); // wraps
  receive(actor_rendezvous(5, 0x10000, 60000, 60000));         // over our limit
  BOOST_TEST(out.reads.empty());
  auto a = answers();
  BOOST_REQUIRE_EQUAL(a.size(), 5u);
  BOOST_TEST(a[0].second == pb::MALFORMED);
  BOOST_TEST(a[1].second == pb::LENGTH_MISMATCH);
  BOOST_TEST(a[2].second == pb::MALFORMED);
  BOOST_TEST(a[3].second == pb::MALFORMED);
  BOOST_TEST(a[4].second == pb::SIZE_LIMIT);
  BOOST_REQUIRE_EQUAL(out.actor_frames.size(), 1u);
  BOOST_TEST(out.actor_frames[0].refused);
  BOOST_TEST(code_of(out.actor_frames[0].why) == errc::size_limit);
  BOOST_TEST(core->stats().rejected_requests == 5u);
  // Without remote actors, nothing is read either.
  opts.remote_actors = false;
  make_core();
  out.posted.clear();
  receive(actor_rendezvous(6, 0x10000, 8000, 8000));
  BOOST_TEST(out.reads.empty());
  BOOST_REQUIRE_EQUAL(answers().size(), 1u);
  BOOST_TEST(answers()[0].second == pb::MALFORMED);
}

// The memory a peer's rendezvous messages hold is bounded by
// peer-max-queued-bytes.
BOOST_AUTO_TEST_CASE(reads_in_flight_are_bounded_by_peer_max_queued_bytes) {
  opts.peer_max_queued_bytes = 20000;
  make_core();
  receive(actor_rendezvous(1, 0x10000, 8000, 8000));
  receive(actor_rendezvous(2, 0x20000, 8000, 8000));
  receive(actor_rendezvous(3, 0x30000, 8000, 8000));
  BOOST_TEST(out.reads.size() == 2u);
  auto a = answers();
  BOOST_REQUIRE_EQUAL(a.size(), 1u);
  BOOST_TEST(a[0].first == 3u);
  BOOST_TEST(a[0].second == pb::QUOTA_EXCEEDED);
  // Refused in its turn: after the two being read.
  BOOST_TEST(out.actor_frames.empty());
  for (auto& r : out.reads)
    r.done(caf::error{});
  BOOST_REQUIRE_EQUAL(out.actor_frames.size(), 3u);
  BOOST_TEST(!out.actor_frames[0].refused);
  BOOST_TEST(!out.actor_frames[1].refused);
  BOOST_TEST(out.actor_frames[2].refused);
}

// Closing with a READ in flight drops the message; its late completion is
// ignored and the memory returns once the transport lets go of it.
BOOST_AUTO_TEST_CASE(close_drops_actor_messages_being_read) {
  auto before = pool->stats().bytes_in_use;
  receive(actor_rendezvous(1, 0x10000, 6000, 6000));
  receive(actor_eager(2), "ok");
  BOOST_REQUIRE_EQUAL(out.reads.size(), 1u);
  core->close(make_error(errc::peer_gone, "gone"));
  BOOST_TEST(core->stats().rendezvous_bytes == 0u);
  out.reads[0].done(caf::error{});
  BOOST_TEST(out.actor_frames.empty());
  out.reads.clear();
  BOOST_TEST(pool->stats().bytes_in_use == before);
}

// A frame whose header outgrows a send's header slot (a lookup answer that
// names a long typed interface, a lookup of a long name) goes whole from
// pool memory; before, the transport refused the post and the connection
// ended.
BOOST_AUTO_TEST_CASE(frames_over_the_header_slot_go_from_pool_memory) {
  peer_hello(false);
  out.posted.clear();
  out.published_name = "wide";
  out.published.id = 11;
  for (int i = 0; i < 12; ++i)
    out.published.interface.push_back("caf::replies_to<@str, @str, @u64, @i"
                                      + std::to_string(i) + ">::with<@str>");
  pb::Message lookup;
  lookup.mutable_request()->set_request_id(77);
  lookup.mutable_request()->mutable_actor_lookup()->set_name("wide");
  receive(lookup);
  BOOST_REQUIRE_EQUAL(out.posted.size(), 1u);
  BOOST_TEST(out.spilled == 1);
  const auto& res = out.posted.back().msg.response();
  BOOST_TEST(res.request_id() == 77u);
  BOOST_TEST(res.actor_lookup().actor_id() == 11u);
  BOOST_TEST(res.actor_lookup().interface_size() == 12);
  BOOST_TEST(out.spilled_bytes > transport::max_send_header_bytes);
  out.posted.clear();
  // A lookup of ours with a 256-byte name and that interface expected.
  bool answered = false;
  core->actors().lookup(
      std::string(256, 'n'), out.published.interface, t0,
      [&](caf::expected<actor_lookup_result>) { answered = true; });
  BOOST_REQUIRE_EQUAL(out.posted.size(), 1u);
  BOOST_TEST(out.spilled == 2);
  BOOST_TEST(out.posted.back().msg.request().actor_lookup().name().size()
             == 256u);
  BOOST_TEST(!answered);
  BOOST_TEST(out.disconnects.empty());
}

BOOST_AUTO_TEST_SUITE_END()
