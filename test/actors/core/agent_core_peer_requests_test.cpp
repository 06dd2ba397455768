// agent_core_test: what the peer asks of the core -- regions it allocates
// and releases -- and the violations that end the connection.

#include <boost/test/unit_test.hpp>

#include "test/actors/core/agent_core_fixture.hpp"

// -- regions the peer allocates and releases ----------------------------------

BOOST_FIXTURE_TEST_SUITE(alloc_and_release, fixture)

BOOST_AUTO_TEST_CASE(alloc_within_quota_answers_ok_with_a_token) {
  auto before = pool->stats().bytes_in_use;
  receive(pb::make_alloc_mr(7, 100, 64));
  auto& res = last_response();
  BOOST_TEST(res.request_id() == 7u);
  BOOST_REQUIRE(res.has_alloc_mr());
  BOOST_TEST(pb::status_of(res) == pb::OK);
  BOOST_REQUIRE(res.alloc_mr().has_token());
  BOOST_TEST(res.alloc_mr().token().len() == 100u);
  BOOST_TEST(res.alloc_mr().token().rkey() != 0u);
  BOOST_TEST(pool->stats().bytes_in_use >= before + 100);
  auto s = core->stats();
  BOOST_TEST(s.owned_mrs == 1u);
  BOOST_TEST(s.peer_alloc_bytes == 100u);
  BOOST_TEST(s.rejected_requests == 0u);
}

BOOST_AUTO_TEST_CASE(alloc_over_peer_max_mrs_is_quota_exceeded) {
  for (uint64_t id = 1; id <= opts.peer_max_mrs; ++id) {
    receive(pb::make_alloc_mr(id, 64, 64));
    BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  }
  receive(pb::make_alloc_mr(99, 64, 64));
  BOOST_TEST(last_response().request_id() == 99u);
  BOOST_TEST(pb::status_of(last_response()) == pb::QUOTA_EXCEEDED);
  BOOST_TEST(!last_response().alloc_mr().has_token());
  BOOST_TEST(core->stats().owned_mrs == opts.peer_max_mrs);
  BOOST_TEST(core->stats().rejected_requests == 1u);
}

BOOST_AUTO_TEST_CASE(alloc_over_peer_max_alloc_bytes_is_quota_exceeded) {
  receive(pb::make_alloc_mr(1, 4000, 64));
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  receive(pb::make_alloc_mr(2, 97, 64)); // 4097 > 4096
  BOOST_TEST(pb::status_of(last_response()) == pb::QUOTA_EXCEEDED);
  receive(pb::make_alloc_mr(3, 96, 64)); // exactly the limit
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  BOOST_TEST(core->stats().peer_alloc_bytes == 4096u);
}

BOOST_AUTO_TEST_CASE(alloc_with_an_invalid_layout_is_refused) {
  receive(pb::make_alloc_mr(1, 64, 3)); // not a power of two
  BOOST_TEST(pb::status_of(last_response()) == pb::INVALID_LAYOUT);
  receive(pb::make_alloc_mr(2, 64, 8192)); // beyond what a peer may ask
  BOOST_TEST(pb::status_of(last_response()) == pb::INVALID_LAYOUT);
  BOOST_TEST(core->stats().owned_mrs == 0u);
  BOOST_TEST(core->stats().rejected_requests == 2u);
}

BOOST_AUTO_TEST_CASE(release_of_an_unknown_token_is_unknown_token) {
  receive(pb::make_release_mr(5, pb::make_token(0x1000, 64, 42)));
  BOOST_TEST(last_response().request_id() == 5u);
  BOOST_REQUIRE(last_response().has_release_mr());
  BOOST_TEST(pb::status_of(last_response()) == pb::UNKNOWN_TOKEN);
}

BOOST_AUTO_TEST_CASE(release_returns_the_memory_and_the_quota) {
  auto before = pool->stats().bytes_in_use;
  receive(pb::make_alloc_mr(1, 4096, 64));
  auto token = last_response().alloc_mr().token();
  receive(pb::make_release_mr(2, token));
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  BOOST_TEST(core->stats().owned_mrs == 0u);
  BOOST_TEST(core->stats().peer_alloc_bytes == 0u);
  BOOST_TEST(pool->stats().bytes_in_use == before);
  receive(pb::make_release_mr(3, token)); // twice: no longer held
  BOOST_TEST(pb::status_of(last_response()) == pb::UNKNOWN_TOKEN);
}

BOOST_AUTO_TEST_CASE(send_mr_local_delivers_the_token_up_to_the_queue_limit) {
  receive(pb::make_send_mr(1, pb::SendMR::LOCAL, pb::make_token(0x10, 8, 3)));
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  receive(pb::make_send_mr(2, pb::SendMR::LOCAL, pb::make_token(0x20, 8, 3)));
  receive(pb::make_send_mr(3, pb::SendMR::LOCAL, pb::make_token(0x30, 8, 3)));
  BOOST_TEST(pb::status_of(last_response()) == pb::QUOTA_EXCEEDED);
  BOOST_REQUIRE(out.remote_mrs.size() == 2u);
  BOOST_TEST(out.remote_mrs[0].addr == 0x10u);
}

BOOST_AUTO_TEST_CASE(send_mr_remote_hands_back_only_what_we_own) {
  receive(pb::make_send_mr(1, pb::SendMR::REMOTE, pb::make_token(0x10, 8, 3)));
  BOOST_TEST(pb::status_of(last_response()) == pb::NOT_OWNED);
  receive(pb::make_alloc_mr(2, 128, 64));
  auto token = last_response().alloc_mr().token();
  receive(pb::make_send_mr(3, pb::SendMR::REMOTE, token));
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  BOOST_REQUIRE(out.local_mrs.size() == 1u);
  BOOST_TEST(out.local_mrs[0].size() == 128u);
  BOOST_TEST(core->stats().owned_mrs == 0u);
  BOOST_TEST(core->stats().peer_alloc_bytes == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

// -- violations ---------------------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(violations, fixture)

BOOST_AUTO_TEST_CASE(max_violations_in_a_row_disconnect_once) {
  auto unknown = pb::make_token(0x1000, 64, 42);
  receive(pb::make_release_mr(1, unknown));
  receive(pb::make_release_mr(2, unknown));
  BOOST_TEST(out.disconnects.empty());
  receive(pb::make_release_mr(3, unknown));
  BOOST_REQUIRE(out.disconnects.size() == 1u);
  BOOST_TEST(code_of(out.disconnects[0]) == errc::quota_exceeded);
  // Once closed, more violations disconnect no more.
  core->close(make_error(errc::peer_gone, "test"));
  receive(pb::make_release_mr(4, unknown));
  BOOST_TEST(out.disconnects.size() == 1u);
}

BOOST_AUTO_TEST_CASE(an_accepted_request_resets_the_count) {
  auto unknown = pb::make_token(0x1000, 64, 42);
  receive(pb::make_release_mr(1, unknown));
  receive(pb::make_release_mr(2, unknown));
  receive(pb::make_alloc_mr(3, 64, 64)); // accepted
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  receive(pb::make_release_mr(4, unknown));
  receive(pb::make_release_mr(5, unknown));
  BOOST_TEST(out.disconnects.empty());
  receive(pb::make_release_mr(6, unknown));
  BOOST_TEST(out.disconnects.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_malformed_frame_is_a_protocol_error_and_a_violation) {
  auto buf = pool->allocate(16, 64, transport::access::local_write);
  BOOST_REQUIRE(buf);
  // Announces 12 message bytes of garbage.
  const uint8_t garbage[16] = {12,   0,    0,    0,    0xff, 0xff, 0xff, 0xff,
                               0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  std::memcpy(buf->data(), garbage, sizeof(garbage));
  for (int i = 0; i < 3; ++i)
    core->on_frame(*buf, t0);
  BOOST_TEST(core->stats().protocol_errors == 3u);
  BOOST_TEST(out.posted.empty()); // nothing to answer
  BOOST_TEST(out.disconnects.size() == 1u);
  // A frame shorter than its header too.
  auto tiny = buf->slice(0, 2);
  BOOST_REQUIRE(tiny);
  core->on_frame(*tiny, t0);
  BOOST_TEST(core->stats().protocol_errors == 4u);
}

BOOST_AUTO_TEST_CASE(send_data_with_a_wrong_length_is_answered) {
  // SendData.len says 10, 4 bytes arrive.
  receive(pb::make_send_data(9, 10), "abcd");
  BOOST_TEST(last_response().request_id() == 9u);
  BOOST_TEST(pb::status_of(last_response()) == pb::LENGTH_MISMATCH);
  BOOST_TEST(core->stats().protocol_errors == 1u);
  BOOST_TEST(out.data.empty());
}

BOOST_AUTO_TEST_CASE(hello_with_another_version_disconnects) {
  receive(hello(pb::protocol_version, false));
  BOOST_TEST(out.disconnects.empty());
  receive(hello(pb::protocol_version + 1, false));
  BOOST_REQUIRE(out.disconnects.size() == 1u);
  BOOST_TEST(code_of(out.disconnects[0]) == errc::version_mismatch);
}

BOOST_AUTO_TEST_CASE(start_posts_our_hello_offering_cumulative_acks) {
  core->start();
  BOOST_REQUIRE(out.posted.size() == 1u);
  BOOST_REQUIRE(out.posted[0].msg.has_hello());
  auto& h = out.posted[0].msg.hello();
  BOOST_TEST(h.version() == pb::protocol_version);
  BOOST_TEST(h.cumulative_acks());
}

BOOST_AUTO_TEST_SUITE_END()
