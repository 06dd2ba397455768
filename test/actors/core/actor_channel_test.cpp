// actor_channel_test: the remote actors' part of the protocol core
// (actors/core/actor_channel.hpp) alone, behind a fake core_port that records
// what the channel asks of the core.

#define BOOST_TEST_MODULE actor_channel_test
#include <boost/test/unit_test.hpp>

#include "actors/core/actor_channel.hpp"
#include "test/actors/core/core_port_fixture.hpp"

namespace {

/// The actor channel and its core, the fake one.
struct channel_fixture : core_port_fixture {
  actor_channel channel{core};

  /// One actor frame from the peer, as the responder hands it over.
  void peer_sends(const pb::ActorMessage& m, const std::string& payload) {
    pb::decode_result frame;
    frame.payload = reinterpret_cast<const uint8_t*>(payload.data());
    frame.payload_len = payload.size();
    channel.on_message(m, frame);
  }
};

pb::ActorMessage actor_frame(uint64_t len, uint64_t total_len = 0) {
  pb::ActorMessage m;
  m.set_target(1);
  m.set_sender(2);
  m.set_len(len);
  m.set_total_len(total_len);
  return m;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(actor_channel_alone, channel_fixture)

BOOST_AUTO_TEST_CASE(a_peer_without_remote_actors_gets_nothing) {
  core.offered_ = 0;
  std::string data(100, 'a');
  auto err = channel.post(5, 6, 7, data.data(), data.size(), false);
  BOOST_TEST(err.code() == static_cast<uint8_t>(errc::not_negotiated));
  BOOST_TEST(out.posted.empty());
}

BOOST_AUTO_TEST_CASE(after_close_a_post_fails_with_the_cores_error) {
  core.closed_ = true;
  std::string data(100, 'a');
  auto err = channel.post(5, 6, 7, data.data(), data.size(), false);
  BOOST_TEST(err.code() == static_cast<uint8_t>(errc::peer_gone));
  BOOST_TEST(out.posted.empty());
}

BOOST_AUTO_TEST_CASE(a_small_message_rides_in_one_frame) {
  std::string data(100, 'a');
  BOOST_REQUIRE(!channel.post(5, 6, 7, data.data(), data.size(), true));
  BOOST_REQUIRE_EQUAL(out.posted.size(), 1u);
  const auto& m = out.posted[0].msg.actor_message();
  BOOST_TEST(m.target() == 5u);
  BOOST_TEST(m.sender() == 6u);
  BOOST_TEST(m.message_id() == 7u);
  BOOST_TEST(m.len() == 100u);
  BOOST_TEST(m.total_len() == 0u);
  BOOST_TEST(m.down());
  BOOST_TEST(out.posted[0].inline_payload == data);
  BOOST_TEST(core.requests.empty());
}

// Without the peer's EXT_ACTOR_RENDEZVOUS a large message goes in frames
// of the max message length; the first announces the whole.
BOOST_AUTO_TEST_CASE(a_large_message_to_a_peer_that_does_not_read_is_chunked) {
  std::string data(10000, 'b');
  BOOST_REQUIRE(!channel.post(5, 6, 7, data.data(), data.size(), false));
  BOOST_REQUIRE_EQUAL(out.posted.size(), 3u);
  BOOST_TEST(out.posted[0].msg.actor_message().total_len() == 10000u);
  uint64_t sum = 0;
  for (auto& f : out.posted)
    sum += f.msg.actor_message().len();
  BOOST_TEST(sum == 10000u);
  BOOST_TEST(core.counters_.rendezvous_sent == 0u);
}

// With it, one request names a registered copy; the answer frees it.
BOOST_AUTO_TEST_CASE(a_large_message_to_a_reading_peer_is_one_request) {
  core.offered_ |= pb::EXT_ACTOR_RENDEZVOUS;
  auto before = pool->stats().bytes_in_use;
  std::string data(10000, 'c');
  BOOST_REQUIRE(!channel.post(5, 6, 7, data.data(), data.size(), false));
  BOOST_TEST(out.posted.empty());
  BOOST_REQUIRE_EQUAL(core.requests.size(), 1u);
  const auto& m = core.requests[0].request().actor_message();
  BOOST_TEST(m.len() == 10000u);
  BOOST_REQUIRE(m.has_source());
  BOOST_TEST(pool->stats().bytes_in_use > before);
  BOOST_TEST(core.counters_.rendezvous_sent == 1u);
  auto res = pb::make_send_data_response(1, pb::OK, {});
  core.answers[0](&res.response(), caf::none);
  core.answers.clear();
  BOOST_TEST(pool->stats().bytes_in_use == before);
}

BOOST_AUTO_TEST_CASE(a_lookup_asks_the_peer_and_checks_its_answer) {
  std::optional<caf::expected<actor_lookup_result>> got;
  channel.lookup("calc", {"sig"}, core.now_,
                 [&](caf::expected<actor_lookup_result> x) { got = x; });
  BOOST_REQUIRE_EQUAL(core.requests.size(), 1u);
  const auto& req = core.requests[0].request();
  BOOST_TEST(req.actor_lookup().name() == "calc");
  BOOST_TEST(req.actor_lookup().expected_interface_size() == 1);
  pb::Message res;
  auto* r = res.mutable_response();
  r->set_request_id(req.request_id());
  r->mutable_actor_lookup()->set_status(pb::OK);
  r->mutable_actor_lookup()->set_actor_id(42);
  core.answers[0](&res.response(), caf::none);
  BOOST_REQUIRE(got && *got);
  BOOST_TEST((*got)->id == 42u);
  // An answer of another kind is the peer's error, not a result.
  got.reset();
  channel.lookup("calc", {}, core.now_,
                 [&](caf::expected<actor_lookup_result> x) { got = x; });
  auto wrong = pb::make_send_data_response(2, pb::OK, {});
  core.answers[1](&wrong.response(), caf::none);
  BOOST_REQUIRE(got && !*got);
  BOOST_TEST(got->error().code()
             == static_cast<uint8_t>(errc::malformed_message));
}

BOOST_AUTO_TEST_CASE(a_lookup_with_an_invalid_name_never_reaches_the_peer) {
  std::optional<caf::expected<actor_lookup_result>> got;
  channel.lookup(std::string(257, 'n'), {}, core.now_,
                 [&](caf::expected<actor_lookup_result> x) { got = x; });
  BOOST_REQUIRE(got && !*got);
  BOOST_TEST(got->error().code()
             == static_cast<uint8_t>(errc::invalid_argument));
  BOOST_TEST(core.requests.empty());
}

BOOST_AUTO_TEST_CASE(the_peers_lookup_is_answered_or_refused) {
  out.published_name = "calc";
  out.published.id = 9;
  pb::ActorLookup req;
  req.set_name("calc");
  channel.on_lookup(3, req);
  BOOST_REQUIRE_EQUAL(core.unsolicited.size(), 1u);
  BOOST_TEST(core.unsolicited[0].response().actor_lookup().actor_id() == 9u);
  BOOST_TEST(core.accepts == 1);
  core.opts_.remote_actors = false;
  channel.on_lookup(4, req);
  BOOST_REQUIRE_EQUAL(core.rejected.size(), 1u);
  BOOST_TEST(core.rejected[0].response().actor_lookup().status()
             == pb::MALFORMED);
}

BOOST_AUTO_TEST_CASE(an_ack_without_flow_both_ways_is_a_violation) {
  core.offered_ = pb::EXT_REMOTE_ACTORS;
  pb::ActorAck ack;
  ack.set_messages(1);
  channel.on_ack(ack);
  BOOST_TEST(core.counters_.protocol_errors == 1u);
  BOOST_TEST(core.violations == 1);
}

BOOST_AUTO_TEST_CASE(the_peers_messages_reach_the_sink) {
  peer_sends(actor_frame(5), "hello");
  BOOST_REQUIRE_EQUAL(out.actor_frames.size(), 1u);
  BOOST_TEST(out.actor_frames[0].bytes == "hello");
  BOOST_TEST(core.accepts == 1);
}

// A chunked message has peer-partial-timeout-ms from its first chunk;
// after it the sink drops it, and the peer is counted a violation.
BOOST_AUTO_TEST_CASE(a_chunked_message_past_its_deadline_is_dropped) {
  peer_sends(actor_frame(3, 10), "abc");
  BOOST_REQUIRE(out.partial_on);
  auto deadline = core.now_ + milliseconds{500};
  BOOST_TEST(
      (channel.expire_partial(core.now_ + milliseconds{499}) == deadline));
  BOOST_TEST(out.partial_drops.empty());
  BOOST_TEST(
      (channel.expire_partial(deadline) == core_port::time_point::max()));
  BOOST_REQUIRE_EQUAL(out.partial_drops.size(), 1u);
  BOOST_TEST(out.partial_drops[0].code()
             == static_cast<uint8_t>(errc::request_timeout));
  BOOST_TEST(core.counters_.partials_dropped == 1u);
  BOOST_TEST(core.violations == 1);
}

// One over the peer's budget is dropped as it grows, not at its deadline.
BOOST_AUTO_TEST_CASE(a_chunked_message_over_the_budget_is_dropped_at_once) {
  core.opts_.peer_max_queued_bytes = 4;
  peer_sends(actor_frame(3, 10), "abc");
  BOOST_TEST(out.partial_drops.empty());
  peer_sends(actor_frame(3), "def");
  BOOST_REQUIRE_EQUAL(out.partial_drops.size(), 1u);
  BOOST_TEST(out.partial_drops[0].code()
             == static_cast<uint8_t>(errc::quota_exceeded));
}

BOOST_AUTO_TEST_SUITE_END()
