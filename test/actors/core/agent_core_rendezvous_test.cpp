// agent_core_test: SendData by rendezvous.

#include <boost/test/unit_test.hpp>

#include "test/actors/core/agent_core_rendezvous_fixture.hpp"

// -- rendezvous (issue 13) ----------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(rendezvous, rendezvous_fixture)

BOOST_AUTO_TEST_CASE(our_hello_offers_rendezvous_up_to_max_rendezvous_bytes) {
  auto& h = our_hello();
  BOOST_TEST((h.extensions() & pb::EXT_RENDEZVOUS) != 0u);
  BOOST_TEST(h.max_rendezvous_bytes() == opts.max_rendezvous_bytes);
  BOOST_TEST(h.max_rendezvous_bytes() == 1024u * 1024u); // the default
  // Eager size = max message length: no offer.
  opts.eager_message_len_bytes = opts.max_message_len_bytes;
  make_core();
  out.posted.clear();
  core->start();
  BOOST_TEST((out.posted.front().msg.hello().extensions() & pb::EXT_RENDEZVOUS)
             == 0u);
  BOOST_TEST(out.posted.front().msg.hello().max_rendezvous_bytes() == 0u);
}

// An eager chunk that arrives while an earlier piece is being read waits
// for it: the user gets them in sending order, each acknowledged once it is
// delivered, and the bytes held meanwhile count against the peer.
BOOST_AUTO_TEST_CASE(an_eager_chunk_waits_behind_a_piece_being_read) {
  auto before = pool->stats().bytes_in_use;
  receive(rendezvous(1, 0x10000, 8000));
  BOOST_REQUIRE_EQUAL(out.reads.size(), 1u);
  BOOST_TEST(out.reads[0].src.addr == 0x10000u);
  BOOST_TEST(out.reads[0].src.len == 8000u);
  BOOST_TEST(out.reads[0].src.rkey == 9u);
  BOOST_TEST(out.reads[0].dst.size() == 8000u);
  receive(pb::make_send_data(2, 3), "abc");
  BOOST_TEST(out.data.empty());
  BOOST_TEST(answers().empty());
  BOOST_TEST(core->stats().rendezvous_bytes == 8003u);
  std::memset(out.reads[0].dst.data(), 0x5a, 8000);
  out.reads[0].done(caf::error{});
  BOOST_REQUIRE_EQUAL(out.data.size(), 2u);
  BOOST_TEST(out.data[0].size() == 8000u);
  BOOST_TEST(out.data[0].data()[7999] == 0x5a);
  BOOST_TEST(std::string(reinterpret_cast<const char*>(out.data[1].data()), 3)
             == "abc");
  auto a = answers();
  BOOST_REQUIRE_EQUAL(a.size(), 2u);
  BOOST_TEST(a[0].first == 1u);
  BOOST_TEST(a[0].second == pb::OK);
  BOOST_TEST(a[1].first == 2u);
  auto s = core->stats();
  BOOST_TEST(s.rendezvous_read == 1u);
  BOOST_TEST(s.rendezvous_bytes == 0u);
  out.data.clear();
  out.reads.clear();
  BOOST_TEST(pool->stats().bytes_in_use == before);
}

// A READ that fails is answered with an error status and counted; the
// chunks behind it are delivered.
BOOST_AUTO_TEST_CASE(a_failed_read_is_answered_and_skipped) {
  receive(rendezvous(1, 0x10000, 5000));
  receive(pb::make_send_data(2, 2), "ok");
  BOOST_REQUIRE_EQUAL(out.reads.size(), 1u);
  out.reads[0].done(make_error(errc::remote_access_error, "bad rkey"));
  BOOST_REQUIRE_EQUAL(out.data.size(), 1u);
  BOOST_TEST(out.data[0].size() == 2u);
  auto a = answers();
  BOOST_REQUIRE_EQUAL(a.size(), 2u);
  BOOST_TEST(a[0].first == 2u);
  BOOST_TEST(a[0].second == pb::OK);
  BOOST_TEST(a[1].first == 1u);
  BOOST_TEST(a[1].second == pb::UNKNOWN_TOKEN);
  BOOST_TEST(core->stats().rejected_requests == 1u);
  BOOST_TEST(core->stats().rendezvous_bytes == 0u);
}

// Closing with a READ in flight drops the piece; its late completion is
// ignored, and the memory returns once the transport lets go of it.
BOOST_AUTO_TEST_CASE(close_drops_pieces_being_read) {
  auto before = pool->stats().bytes_in_use;
  receive(rendezvous(1, 0x10000, 6000));
  BOOST_REQUIRE_EQUAL(out.reads.size(), 1u);
  core->close(make_error(errc::peer_gone, "gone"));
  BOOST_TEST(core->stats().rendezvous_bytes == 0u);
  out.reads[0].done(caf::error{});
  BOOST_TEST(out.data.empty());
  out.reads.clear();
  BOOST_TEST(pool->stats().bytes_in_use == before);
}

// To a peer that offers rendezvous, send_data sends header-only pieces of
// up to the peer's max_rendezvous_bytes naming our memory through a
// registration of its own; what fits an eager frame goes eagerly.
BOOST_AUTO_TEST_CASE(send_data_goes_by_rendezvous_to_a_peer_that_offers_it) {
  auto h = hello(pb::protocol_version, false);
  h.mutable_hello()->set_extensions(pb::EXT_RENDEZVOUS);
  h.mutable_hello()->set_max_rendezvous_bytes(16384);
  receive(h);
  auto mr = pool->allocate(40000, 64, transport::access::local_write);
  BOOST_REQUIRE(mr);
  caf::expected<uint64_t> sent{uint64_t{0}};
  bool done = false;
  core->data().send(*mr, t0, [&](caf::expected<uint64_t> x) {
    sent = std::move(x);
    done = true;
  });
  std::vector<uint64_t> ids;
  uint64_t offset = 0;
  for (auto& f : out.posted) {
    BOOST_REQUIRE(f.msg.has_request());
    auto& sd = f.msg.request().send_data();
    BOOST_REQUIRE(sd.has_source());
    BOOST_TEST(!f.payload.valid());
    BOOST_TEST(sd.source().addr() == mr->addr() + offset);
    BOOST_TEST(sd.source().len() == sd.len());
    BOOST_TEST(sd.source().rkey() != mr->rkey());
    offset += sd.len();
    ids.push_back(f.msg.request().request_id());
  }
  BOOST_TEST(offset == 40000u);
  BOOST_REQUIRE_EQUAL(ids.size(), 3u);
  BOOST_TEST(core->stats().rendezvous_sent == 3u);
  for (auto id : ids)
    receive(pb::make_send_data_response(id, pb::OK, {}));
  BOOST_REQUIRE(done);
  BOOST_REQUIRE(sent);
  BOOST_TEST(*sent == 40000u);
}

// A peer whose Hello does not offer it gets eager chunks only.
BOOST_AUTO_TEST_CASE(a_peer_without_the_offer_gets_eager_chunks) {
  receive(hello(pb::protocol_version, false));
  auto mr = pool->allocate(10000, 64, transport::access::local_write);
  BOOST_REQUIRE(mr);
  core->data().send(*mr, t0, [](caf::expected<uint64_t>) {});
  BOOST_REQUIRE(!out.posted.empty());
  for (auto& f : out.posted) {
    BOOST_TEST(!f.msg.request().send_data().has_source());
    BOOST_TEST(f.payload.size() == f.msg.request().send_data().len());
  }
  BOOST_TEST(out.posted.size() == 3u); // 4066 + 4066 + 1868
  BOOST_TEST(core->stats().rendezvous_sent == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
