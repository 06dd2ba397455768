// agent_core_test: the protocol extensions -- immediate data, operations
// waiting for the Hello, leases.

#include <boost/test/unit_test.hpp>

#include "test/actors/core/agent_core_fixture.hpp"

BOOST_FIXTURE_TEST_SUITE(extensions, fixture)

BOOST_AUTO_TEST_CASE(a_write_imm_we_did_not_offer_is_dropped_as_noise) {
  opts.immediate_data = false;
  make_core();
  core->on_write_imm(5, 64, t0);
  BOOST_TEST(out.imms.empty());
  BOOST_TEST(core->stats().imms_dropped == 1u);
  BOOST_TEST(core->stats().protocol_errors == 1u);
  BOOST_TEST(out.disconnects.empty());
}

BOOST_AUTO_TEST_CASE(write_imms_over_the_queue_limit_are_dropped) {
  opts.peer_max_queued_imms = 2;
  make_core();
  for (uint32_t i = 0; i < 3; ++i)
    core->on_write_imm(i, 64, t0);
  BOOST_TEST(out.imms == (std::vector<uint32_t>{0, 1}));
  BOOST_TEST(core->stats().imms_dropped == 1u);
}

BOOST_AUTO_TEST_CASE(a_send_data_value_we_did_not_offer_is_refused) {
  opts.immediate_data = false;
  make_core();
  receive(pb::make_send_data(42, 3, 9), "abc");
  BOOST_TEST(out.data.empty());
  BOOST_TEST(last_response().request_id() == 42u);
  BOOST_TEST(pb::status_of(last_response()) == pb::MALFORMED);
}

BOOST_AUTO_TEST_CASE(a_send_data_value_waits_for_the_hello) {
  auto mr = pool->allocate(10, 64, transport::access::local_write);
  BOOST_REQUIRE(mr);
  caf::expected<uint64_t> result{uint64_t{0}};
  bool done = false;
  core->data().send(
      *mr, t0,
      [&](caf::expected<uint64_t> x) {
        done = true;
        result = std::move(x);
      },
      uint32_t{77});
  BOOST_TEST(out.posted.empty());
  // A Hello that does not offer immediate data: not_negotiated.
  receive(hello(pb::protocol_version, true));
  BOOST_REQUIRE(done);
  BOOST_REQUIRE(!result);
  BOOST_TEST(code_of(result.error()) == errc::not_negotiated);
  BOOST_TEST(out.posted.empty());
  // Once offered, the value travels in SendData.imm.
  auto h = hello(pb::protocol_version, true);
  h.mutable_hello()->set_extensions(pb::EXT_IMMEDIATE_DATA);
  receive(h);
  done = false;
  core->data().send(
      *mr, t0, [&](caf::expected<uint64_t>) { done = true; }, uint32_t{78});
  BOOST_REQUIRE(out.posted.size() == 1u);
  const auto& sd = out.posted[0].msg.request().send_data();
  BOOST_TEST(sd.has_imm());
  BOOST_TEST(sd.imm() == 78u);
  BOOST_TEST(sd.len() == 10u);
}

BOOST_AUTO_TEST_CASE(an_operation_waiting_for_the_hello_times_out) {
  caf::error got;
  bool called = false;
  core->when_offered(pb::EXT_MR_TAGS, "tagged send_mr", t0,
                     [&](const caf::error& err) {
                       called = true;
                       got = err;
                     });
  BOOST_TEST(!called);
  BOOST_TEST(out.sweeps > 0);
  auto next = core->expire(t0 + milliseconds{opts.request_timeout_ms - 1});
  BOOST_TEST(!called);
  BOOST_TEST((next == t0 + milliseconds{opts.request_timeout_ms}));
  core->expire(t0 + milliseconds{opts.request_timeout_ms});
  BOOST_REQUIRE(called);
  BOOST_TEST(code_of(got) == errc::request_timeout);
}

BOOST_AUTO_TEST_CASE(a_lease_is_revoked_at_its_end_unless_renewed) {
  auto h = hello(pb::protocol_version, true);
  h.mutable_hello()->set_extensions(pb::EXT_LEASES);
  receive(h);
  auto mr = pool->allocate(256, 64, transport::access::all);
  BOOST_REQUIRE(mr);
  caf::expected<mr_token> lent{mr_token{}};
  core->regions().lend(
      *mr, t0, [&](caf::expected<mr_token> x) { lent = std::move(x); }, 0,
      1000);
  BOOST_REQUIRE(out.posted.size() == 1u);
  const auto& req = out.posted[0].msg.request();
  BOOST_TEST(req.send_mr().lease_ms() == 1000u);
  BOOST_TEST(req.send_mr().token().rkey() != mr->rkey());
  receive(pb::make_send_mr_response(req.request_id(), pb::OK, {}));
  BOOST_REQUIRE(lent);
  BOOST_TEST(lent->rkey == req.send_mr().token().rkey());
  BOOST_TEST(core->stats().owned_mrs == 1u);
  auto tok = pb::make_token(lent->addr, lent->len, lent->rkey);
  // Renewed at 500 ms for at most the original 1000 ms: ends at 1500 ms.
  core->on_frame(frame(pb::make_renew_lease(77, tok, 5000)),
                 t0 + milliseconds{500});
  BOOST_TEST(last_response().request_id() == 77u);
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  BOOST_TEST(last_response().renew_lease().lease_ms() == 1000u);
  auto next = core->expire(t0 + milliseconds{1499});
  BOOST_TEST((next == t0 + milliseconds{1500}));
  BOOST_TEST(core->stats().owned_mrs == 1u);
  core->expire(t0 + milliseconds{1500});
  BOOST_TEST(core->stats().owned_mrs == 0u);
  BOOST_TEST(core->stats().leases_expired == 1u);
  // A renewal after the end: UNKNOWN_TOKEN, no disconnect.
  core->on_frame(frame(pb::make_renew_lease(78, tok, 1000)),
                 t0 + milliseconds{1600});
  BOOST_TEST(pb::status_of(last_response()) == pb::UNKNOWN_TOKEN);
  BOOST_TEST(out.disconnects.empty());
}

BOOST_AUTO_TEST_CASE(a_lease_needs_a_peer_that_offers_leases) {
  receive(hello(pb::protocol_version, true));
  auto mr = pool->allocate(256, 64, transport::access::all);
  BOOST_REQUIRE(mr);
  caf::expected<mr_token> lent{mr_token{}};
  core->regions().lend(
      *mr, t0, [&](caf::expected<mr_token> x) { lent = std::move(x); }, 0,
      1000);
  BOOST_REQUIRE(!lent);
  BOOST_TEST(code_of(lent.error()) == errc::not_negotiated);
  BOOST_TEST(out.posted.empty());
  BOOST_TEST(core->stats().owned_mrs == 0u);
}

BOOST_AUTO_TEST_CASE(packing_is_offered_and_used_once_the_peer_offers_it) {
  BOOST_TEST((our_hello().extensions() & pb::EXT_PACKED_FRAMES) != 0u);
  receive(hello(pb::protocol_version, true));
  BOOST_TEST(out.pack_limit == 0u); // the peer did not offer it
  auto h = hello(pb::protocol_version, true);
  h.mutable_hello()->set_extensions(pb::EXT_PACKED_FRAMES);
  receive(h);
  BOOST_TEST(out.pack_limit == max_message_len);
}

BOOST_AUTO_TEST_CASE(every_frame_of_a_packed_message_is_served_in_order) {
  core->on_frame(packed({{pb::make_send_data(41, 3), "abc"},
                         {pb::make_send_data_response(99, pb::OK, ""), ""},
                         {pb::make_send_data(42, 5), "defgh"}}),
                 t0);
  BOOST_REQUIRE_EQUAL(out.data.size(), 2u);
  auto text = [](const local_mr& m) {
    return std::string(reinterpret_cast<const char*>(m.data()), m.size());
  };
  BOOST_TEST(text(out.data[0]) == "abc");
  BOOST_TEST(text(out.data[1]) == "defgh");
  // The response in between answered nothing we asked: one noise count.
  BOOST_TEST(core->stats().protocol_errors == 1u);
  BOOST_TEST(out.disconnects.empty());
}

BOOST_AUTO_TEST_CASE(a_broken_frame_ends_the_packed_message_there) {
  auto buf = packed(
      {{pb::make_send_data(41, 3), "abc"}, {pb::make_send_data(42, 3), "def"}});
  // The second frame's header now announces more than arrived.
  auto first_len
      = pb::frame_header_len + pb::make_send_data(41, 3).ByteSizeLong() + 3;
  auto* second = buf.data() + first_len;
  second[0] = 0xff;
  second[1] = 0xff;
  core->on_frame(buf, t0);
  BOOST_REQUIRE_EQUAL(out.data.size(), 1u);
  BOOST_TEST(core->stats().protocol_errors == 1u);
}

BOOST_AUTO_TEST_CASE(frames_beyond_max_packed_frames_are_a_violation) {
  std::vector<std::pair<pb::Message, std::string>> parts;
  for (size_t i = 0; i <= tuning::max_packed_frames; ++i)
    parts.emplace_back(pb::make_send_data(100 + i, 1), "x");
  core->on_frame(packed(parts), t0);
  BOOST_TEST(out.data.size() == tuning::max_packed_frames);
  BOOST_TEST(core->stats().protocol_errors == 1u);
}

BOOST_AUTO_TEST_CASE(frames_packed_behind_a_goodbye_are_not_served) {
  core->on_frame(packed({{pb::make_goodbye("bye"), ""},
                         {pb::make_send_data(42, 3), "def"}}),
                 t0);
  BOOST_TEST(out.data.empty());
  BOOST_TEST(core->stats().protocol_errors == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
