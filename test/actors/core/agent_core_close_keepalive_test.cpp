// agent_core_test: graceful close (Goodbye) and keepalive.

#include <boost/test/unit_test.hpp>

#include "test/actors/core/agent_core_fixture.hpp"

// -- graceful close and keepalive (issue 15) ----------------------------------

namespace {

/// A Hello from the peer that offers Goodbye and keepalive as given.
pb::Message hello_offering(bool goodbye, bool keepalive) {
  auto msg = hello(pb::protocol_version, true);
  msg.mutable_hello()->set_goodbye(goodbye);
  msg.mutable_hello()->set_keepalive(keepalive);
  return msg;
}

/// Posted frames that are Pings.
size_t pings(const recording_sink& out) {
  return static_cast<size_t>(std::count_if(
      out.posted.begin(), out.posted.end(), [](const posted_frame& f) {
        return f.msg.has_request() && f.msg.request().has_ping();
      }));
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(close_and_keepalive, fixture)

BOOST_AUTO_TEST_CASE(our_hello_offers_goodbye_and_keepalive) {
  core->start();
  BOOST_REQUIRE(out.posted.size() == 1u);
  BOOST_TEST(out.posted[0].msg.hello().goodbye());
  BOOST_TEST(out.posted[0].msg.hello().keepalive());
}

BOOST_AUTO_TEST_CASE(a_peer_that_does_not_offer_goodbye_gets_none) {
  receive(hello_offering(false, false));
  BOOST_TEST(!core->live().peer_offers_goodbye());
  auto frame = core->live().goodbye_frame("bye");
  BOOST_REQUIRE(!frame);
  BOOST_TEST(code_of(frame.error()) == errc::closed);
}

BOOST_AUTO_TEST_CASE(goodbye_frames_decode_as_goodbye) {
  receive(hello_offering(true, false));
  auto frame = core->live().goodbye_frame("closed by the application");
  BOOST_REQUIRE(frame);
  pb::Message msg;
  auto res = pb::decode(frame->data(), frame->size(), max_message_len, msg);
  BOOST_TEST(res.code == errc::none);
  BOOST_REQUIRE(msg.has_goodbye());
  BOOST_TEST(msg.goodbye().reason() == "closed by the application");
}

BOOST_AUTO_TEST_CASE(the_peers_goodbye_is_noted_with_a_sanitized_reason) {
  receive(hello_offering(true, true));
  BOOST_TEST(!core->live().peer_said_goodbye());
  auto bye = pb::make_goodbye(std::string(500, 'x') + "\n");
  receive(bye);
  BOOST_TEST(core->live().peer_said_goodbye());
  BOOST_TEST(core->live().goodbye_reason().size() == 200u);
  BOOST_TEST(core->stats().protocol_errors == 0u);
  // We say no Goodbye to a peer that said its own.
  BOOST_TEST(!core->live().goodbye_frame("bye"));
}

BOOST_AUTO_TEST_CASE(a_ping_from_the_peer_is_answered_with_a_pong) {
  receive(pb::make_ping(77));
  const auto& res = last_response();
  BOOST_TEST(res.request_id() == 77u);
  BOOST_TEST(res.has_pong());
  BOOST_TEST(pb::status_of(res) == pb::OK);
  BOOST_TEST(core->stats().rejected_requests == 0u);
}

BOOST_AUTO_TEST_CASE(an_idle_peer_is_pinged_then_dropped) {
  opts.keepalive_ms = 100;
  make_core();
  receive(hello_offering(true, true)); // heard at t0
  BOOST_REQUIRE(core->live().keepalive_active());
  // The silence before a Ping: a random share of keepalive-ms in [3/4, 1].
  auto s = core->live().silence();
  BOOST_TEST(s.count() >= 75);
  BOOST_TEST(s.count() <= 100);
  auto step = core->live().keepalive(t0 + milliseconds{50});
  BOOST_TEST(!step.dead);
  BOOST_TEST((step.next == t0 + s));
  BOOST_TEST(pings(out) == 0u);
  // That silence: one Ping, the next look keepalive-ms later.
  step = core->live().keepalive(t0 + s);
  BOOST_TEST(!step.dead);
  BOOST_TEST(pings(out) == 1u);
  BOOST_TEST(core->stats().keepalive_pings == 1u);
  BOOST_TEST((step.next == t0 + s + milliseconds{100}));
  // Still silent before then: no second Ping.
  step = core->live().keepalive(t0 + s + milliseconds{50});
  BOOST_TEST(!step.dead);
  BOOST_TEST(pings(out) == 1u);
  // Silent for keepalive-ms after the Ping: dead, and the error says what
  // to do.
  step = core->live().keepalive(t0 + s + milliseconds{100});
  BOOST_REQUIRE(step.dead);
  BOOST_TEST(code_of(step.dead) == errc::peer_gone);
  BOOST_TEST(what_of(step.dead).find("keepalive-ms") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_pong_or_any_frame_keeps_the_peer_alive) {
  opts.keepalive_ms = 100;
  make_core();
  receive(hello_offering(true, true));
  core->live().keepalive(t0 + milliseconds{100});
  BOOST_REQUIRE(pings(out) == 1u);
  auto id = out.posted.back().msg.request().request_id();
  // The Pong arrives late but within the bound.
  core->on_frame(frame(pb::make_pong(id)), t0 + milliseconds{190});
  auto step = core->live().keepalive(t0 + milliseconds{200});
  BOOST_TEST(!step.dead);
  BOOST_TEST((step.next == t0 + milliseconds{190} + core->live().silence()));
  BOOST_TEST(core->stats().protocol_errors == 0u);
  // Frames keep coming: no Ping at all (a busy connection sends none).
  for (int i = 1; i <= 10; ++i) {
    core->on_frame(frame(pb::make_ping(1000 + i)),
                   t0 + milliseconds{190 + 80 * i});
    step = core->live().keepalive(t0 + milliseconds{190 + 80 * i + 50});
    BOOST_TEST(!step.dead);
  }
  BOOST_TEST(pings(out) == 1u);
}

// The Hello and keepalive frames are upkeep, not traffic: the Hello, Pings
// and Pongs the core posts go through `post_upkeep` and the ones it
// receives are reported with `upkeep_frame`, so that the agent's link
// driver starts no polling tail for them (setting a connection up and
// keeping an idle one alive cost no polling).  Other frames are not.
BOOST_AUTO_TEST_CASE(hello_pings_and_pongs_are_upkeep_other_frames_are_not) {
  opts.keepalive_ms = 100;
  make_core();
  core->start(); // our Hello
  BOOST_REQUIRE(!out.posted.empty());
  BOOST_TEST(out.posted.back().msg.has_hello());
  BOOST_TEST(out.upkeep_posts == 1u);
  receive(hello_offering(true, true));
  BOOST_TEST(out.upkeep_frames == 1u);
  receive(pb::make_ping(77)); // answered with a Pong
  BOOST_TEST(out.upkeep_frames == 2u);
  BOOST_TEST(out.upkeep_posts == 2u);
  BOOST_TEST(last_response().has_pong());
  core->live().keepalive(t0 + milliseconds{200}); // our Ping
  BOOST_REQUIRE(pings(out) == 1u);
  BOOST_TEST(out.upkeep_posts == 3u);
  auto id = out.posted.back().msg.request().request_id();
  core->on_frame(frame(pb::make_pong(id)), t0 + milliseconds{210});
  BOOST_TEST(out.upkeep_frames == 3u);
  // Traffic: an AllocMR and its answer are not upkeep.
  receive(pb::make_alloc_mr(5, 64, 8));
  BOOST_TEST(out.upkeep_frames == 3u);
  BOOST_TEST(out.upkeep_posts == 3u);
  // A Pong nobody asked for is noise, not upkeep.
  receive(pb::make_pong(12345));
  BOOST_TEST(out.upkeep_frames == 3u);
}

BOOST_AUTO_TEST_CASE(a_pong_nobody_asked_for_is_noise) {
  receive(pb::make_pong(12345));
  BOOST_TEST(core->stats().protocol_errors == 1u);
}

BOOST_AUTO_TEST_CASE(keepalive_is_off_with_zero_or_a_peer_without_it) {
  opts.keepalive_ms = 0;
  make_core();
  receive(hello_offering(true, true));
  BOOST_TEST(!core->live().keepalive_active());
  auto step = core->live().keepalive(t0 + std::chrono::hours{1});
  BOOST_TEST(!step.dead);
  BOOST_TEST((step.next == agent_core::time_point::max()));
  opts.keepalive_ms = 100;
  make_core();
  receive(hello_offering(true, false));
  BOOST_TEST(!core->live().keepalive_active());
  step = core->live().keepalive(t0 + std::chrono::hours{1});
  BOOST_TEST(!step.dead);
  BOOST_TEST(pings(out) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
