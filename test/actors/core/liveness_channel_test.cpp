// liveness_channel_test: keepalive and graceful close of the protocol core
// (actors/core/liveness_channel.hpp) alone, behind a fake core_port.

#define BOOST_TEST_MODULE liveness_channel_test
#include <boost/test/unit_test.hpp>

#include "actors/core/liveness_channel.hpp"
#include "test/actors/core/core_port_fixture.hpp"

namespace {

/// keepalive-ms = 100, and a silence of exactly that (random 0).
struct keepalive_on : core_port_fixture {
  keepalive_on() {
    core.opts_.keepalive_ms = 100;
  }
};

struct live_fixture : keepalive_on {
  liveness_channel live{core, 0};
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(liveness_channel_alone, live_fixture)

BOOST_AUTO_TEST_CASE(nothing_runs_before_the_peer_offers_keepalive) {
  BOOST_TEST(!live.keepalive_active());
  auto step = live.keepalive(core.now_ + milliseconds{500});
  BOOST_TEST(!step.dead);
  BOOST_TEST(core.unsolicited.empty());
}

// Silent for the silence: one Ping (upkeep); silent for keepalive-ms
// after it: dead, with an error that says what to raise.
BOOST_AUTO_TEST_CASE(a_silent_peer_is_pinged_then_found_dead) {
  live.offered(true, true);
  live.heard(core.now_);
  BOOST_TEST(live.keepalive_active());
  BOOST_TEST(live.silence().count() == 100);
  auto step = live.keepalive(core.now_ + milliseconds{100});
  BOOST_REQUIRE_EQUAL(core.unsolicited.size(), 1u);
  BOOST_TEST(core.unsolicited[0].request().has_ping());
  BOOST_TEST(core.upkeep == 1);
  BOOST_TEST(core.counters_.keepalive_pings == 1u);
  BOOST_TEST(!step.dead);
  step = live.keepalive(core.now_ + milliseconds{200});
  BOOST_REQUIRE(step.dead);
  BOOST_TEST(step.dead.code() == static_cast<uint8_t>(errc::peer_gone));
  BOOST_TEST(what_of(step.dead).find("keepalive-ms") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_pong_to_our_ping_keeps_the_peer_alive) {
  live.offered(true, true);
  live.heard(core.now_);
  live.keepalive(core.now_ + milliseconds{100});
  auto ping_id = core.unsolicited[0].request().request_id();
  live.heard(core.now_ + milliseconds{150});
  live.on_pong(pb::make_pong(ping_id).response());
  BOOST_TEST(core.noise == 0);
  auto step = live.keepalive(core.now_ + milliseconds{200});
  BOOST_TEST(!step.dead);
  // A Pong nobody asked for is noise.
  live.on_pong(pb::make_pong(ping_id + 1).response());
  BOOST_TEST(core.noise == 1);
}

BOOST_AUTO_TEST_CASE(a_ping_is_answered_with_a_pong_even_with_keepalive_off) {
  live.on_ping(9);
  BOOST_REQUIRE_EQUAL(core.unsolicited.size(), 1u);
  BOOST_TEST(core.unsolicited[0].response().has_pong());
  BOOST_TEST(core.unsolicited[0].response().request_id() == 9u);
  BOOST_TEST(core.upkeep == 1);
  BOOST_TEST(core.accepts == 1);
}

BOOST_AUTO_TEST_CASE(goodbye_goes_only_to_a_peer_that_takes_it) {
  auto refused = live.goodbye_frame("bye");
  BOOST_REQUIRE(!refused);
  BOOST_TEST(refused.error().code() == static_cast<uint8_t>(errc::closed));
  live.offered(true, false);
  auto frame = live.goodbye_frame("bye");
  BOOST_REQUIRE(frame);
  pb::Message msg;
  auto res = pb::decode(frame->data(), frame->size(), max_message_len, msg);
  BOOST_REQUIRE(res.code == errc::none);
  BOOST_TEST(msg.goodbye().reason() == "bye");
  // After the peer's own Goodbye, ours is not sent.
  pb::Goodbye bye;
  bye.set_reason("done");
  live.on_goodbye(bye);
  BOOST_TEST(live.peer_said_goodbye());
  BOOST_TEST(live.goodbye_reason() == "done");
  BOOST_TEST(!live.goodbye_frame("bye"));
}

BOOST_AUTO_TEST_CASE(after_close_keepalive_stops) {
  live.offered(true, true);
  core.closed_ = true;
  BOOST_TEST(!live.keepalive_active());
  auto step = live.keepalive(core.now_ + milliseconds{1000});
  BOOST_TEST(!step.dead);
  BOOST_TEST((step.next == core_port::time_point::max()));
  BOOST_TEST(core.unsolicited.empty());
}

BOOST_AUTO_TEST_SUITE_END()
