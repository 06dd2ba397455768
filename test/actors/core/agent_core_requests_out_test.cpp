// agent_core_test: the core's requests to the peer.

#include <boost/test/unit_test.hpp>

#include "test/actors/core/agent_core_fixture.hpp"

// -- requests to the peer -----------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(requests_out, fixture)

BOOST_AUTO_TEST_CASE(also_acked_completes_pending_requests) {
  outcome a, b, c;
  auto ia = pending_send_data(a);
  auto ib = pending_send_data(b);
  auto ic = pending_send_data(c);
  BOOST_TEST(out.posted.size() == 3u);
  BOOST_TEST(out.sweeps >= 1);
  BOOST_TEST(core->stats().pending_requests == 3u);
  receive(pb::make_send_data_acks({ia, ib, ic, 12345}));
  BOOST_TEST(a.called);
  BOOST_TEST(b.called);
  BOOST_TEST(c.called);
  BOOST_TEST(!a.err);
  BOOST_TEST(!c.err);
  BOOST_TEST(core->stats().pending_requests == 0u);
  BOOST_TEST(core->stats().merged_acks_received == 2u);
  BOOST_TEST(core->stats().protocol_errors == 1u); // 12345
}

BOOST_AUTO_TEST_CASE(a_refusal_acknowledges_nothing_more) {
  outcome a, b;
  auto ia = pending_send_data(a);
  auto ib = pending_send_data(b);
  auto res = pb::make_send_data_response(ia, pb::QUOTA_EXCEEDED, "no");
  res.mutable_response()->mutable_send_data()->add_also_acked(ib);
  receive(res);
  BOOST_TEST(a.called);
  BOOST_TEST(!b.called);
  BOOST_TEST(core->stats().protocol_errors == 1u);
}

BOOST_AUTO_TEST_CASE(send_data_completes_when_every_chunk_is_acked) {
  auto chunk_max = max_message_len - pb::max_frame_overhead;
  auto mr = pool->allocate(2 * chunk_max + 10, 64, transport::access::all);
  BOOST_REQUIRE(mr);
  caf::expected<uint64_t> result = uint64_t{0};
  bool done = false;
  core->data().send(*mr, t0, [&](caf::expected<uint64_t> r) {
    done = true;
    result = std::move(r);
  });
  BOOST_REQUIRE(out.posted.size() == 3u);
  std::vector<uint64_t> ids;
  for (auto& f : out.posted) {
    BOOST_REQUIRE(f.msg.request().has_send_data());
    ids.push_back(f.msg.request().request_id());
  }
  BOOST_TEST(out.posted[0].payload.size() == chunk_max);
  BOOST_TEST(out.posted[2].payload.size() == 10u);
  receive(pb::make_send_data_acks({ids[0], ids[1]}));
  BOOST_TEST(!done);
  receive(pb::make_send_data_acks({ids[2]}));
  BOOST_REQUIRE(done);
  BOOST_REQUIRE(result);
  BOOST_TEST(*result == 2 * chunk_max + 10);
}

BOOST_AUTO_TEST_CASE(expire_times_out_requests_at_their_deadline) {
  outcome o;
  auto id = pending_send_data(o);
  auto timeout = milliseconds{opts.request_timeout_ms};
  auto next = core->expire(t0 + timeout - milliseconds{1});
  BOOST_TEST(!o.called);
  BOOST_TEST((next == t0 + timeout));
  next = core->expire(t0 + timeout);
  BOOST_REQUIRE(o.called);
  BOOST_TEST(code_of(o.err) == errc::request_timeout);
  BOOST_TEST((next == agent_core::time_point::max()));
  BOOST_TEST(core->stats().pending_requests == 0u);
  // Its answer comes too late: counted and dropped.
  receive(pb::make_send_data_response(id, pb::OK, {}));
  BOOST_TEST(core->stats().protocol_errors == 1u);
}

BOOST_AUTO_TEST_CASE(a_late_ok_alloc_answer_is_released) {
  caf::error err;
  core->regions().alloc(64, 64, t0, [&](caf::expected<mr_token> t) {
    BOOST_REQUIRE(!t);
    err = t.error();
  });
  BOOST_REQUIRE(out.posted.size() == 1u);
  auto id = out.posted[0].msg.request().request_id();
  core->expire(t0 + milliseconds{opts.request_timeout_ms});
  BOOST_TEST(code_of(err) == errc::request_timeout);
  auto token = pb::make_token(0xabc0, 64, 77);
  receive(pb::make_alloc_mr_response(id, pb::OK, {}, token));
  BOOST_REQUIRE(out.posted.size() == 2u);
  auto& req = out.posted[1].msg.request();
  BOOST_REQUIRE(req.has_release_mr());
  BOOST_TEST(req.release_mr().token().addr() == 0xabc0u);
  BOOST_TEST(req.release_mr().token().rkey() == 77u);
  BOOST_TEST(core->stats().protocol_errors == 0u);
  // Only once: a second answer is an unknown one.
  receive(pb::make_alloc_mr_response(id, pb::OK, {}, token));
  BOOST_TEST(out.posted.size() == 2u);
  BOOST_TEST(core->stats().protocol_errors == 1u);
}

BOOST_AUTO_TEST_CASE(alloc_remote_answers_the_token) {
  caf::expected<mr_token> got = mr_token{};
  core->regions().alloc(64, 64, t0,
                        [&](caf::expected<mr_token> t) { got = t; });
  auto id = out.posted[0].msg.request().request_id();
  receive(
      pb::make_alloc_mr_response(id, pb::OK, {}, pb::make_token(0x40, 64, 5)));
  BOOST_REQUIRE(got);
  BOOST_TEST(got->addr == 0x40u);
  core->regions().alloc(64, 64, t0,
                        [&](caf::expected<mr_token> t) { got = t; });
  id = out.posted[1].msg.request().request_id();
  receive(pb::make_alloc_mr_response(id, pb::SIZE_LIMIT, "too big"));
  BOOST_REQUIRE(!got);
  BOOST_TEST(code_of(got.error()) == errc::size_limit);
}

BOOST_AUTO_TEST_CASE(too_many_pending_requests_fail_at_once) {
  opts.peer_max_pending_requests = 2;
  make_core();
  outcome a, b, c;
  pending_send_data(a);
  pending_send_data(b);
  pending_send_data(c);
  BOOST_TEST(!a.called);
  BOOST_REQUIRE(c.called);
  BOOST_TEST(code_of(c.err) == errc::quota_exceeded);
  BOOST_TEST(out.posted.size() == 2u);
}

BOOST_AUTO_TEST_CASE(close_fails_pending_and_owned_memory_returns) {
  outcome o;
  pending_send_data(o, 256);
  {
    receive(pb::make_alloc_mr(1, 1024, 64)); // held for the peer
    auto lent = pool->allocate(512, 64, transport::access::all);
    BOOST_REQUIRE(lent);
    caf::error lend_err;
    core->regions().lend(
        *lent, t0, [&](caf::expected<mr_token> t) { lend_err = t.error(); });
    BOOST_TEST(core->stats().owned_mrs == 2u);
    auto err = make_error(errc::peer_gone, "test");
    core->close(err);
    BOOST_TEST(core->closed());
    BOOST_REQUIRE(o.called);
    BOOST_TEST(code_of(o.err) == errc::peer_gone);
    BOOST_TEST(code_of(lend_err) == errc::peer_gone);
    // The failed lend keeps the region while the connection closes.
    BOOST_TEST(core->stats().owned_mrs == 2u);
  }
  out.posted.clear(); // payloads of our sends
  BOOST_TEST(pool->stats().bytes_in_use > 0u);
  auto owned = core->take_owned();
  BOOST_TEST(owned.size() == 2u);
  BOOST_TEST(core->stats().owned_mrs == 0u);
  BOOST_TEST(core->stats().peer_alloc_bytes == 0u);
  BOOST_TEST(pool->stats().bytes_in_use > 0u);
  owned.clear();
  BOOST_TEST(pool->stats().bytes_in_use == 0u);
  // Closed: new requests fail at once.
  outcome late;
  pending_send_data(late);
  BOOST_REQUIRE(late.called);
  BOOST_TEST(code_of(late.err) == errc::peer_gone);
  BOOST_TEST(out.posted.empty());
}

BOOST_AUTO_TEST_CASE(a_failed_lend_forgets_the_region) {
  auto lent = pool->allocate(512, 64, transport::access::all);
  BOOST_REQUIRE(lent);
  caf::error err;
  core->regions().lend(*lent, t0,
                       [&](caf::expected<mr_token> t) { err = t.error(); });
  BOOST_TEST(core->stats().owned_mrs == 1u);
  core->regions().lend(*lent, t0,
                       [&](caf::expected<mr_token> t) { err = t.error(); });
  BOOST_TEST(code_of(err) == errc::already_sent);
  auto id = out.posted[0].msg.request().request_id();
  receive(pb::make_send_mr_response(id, pb::QUOTA_EXCEEDED, "full"));
  BOOST_TEST(code_of(err) == errc::quota_exceeded);
  BOOST_TEST(core->stats().owned_mrs == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
