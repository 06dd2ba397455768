// data_channel_test: SendData of the protocol core, both ways
// (actors/core/data_channel.hpp), alone behind a fake core_port.

#define BOOST_TEST_MODULE data_channel_test
#include <boost/test/unit_test.hpp>

#include "actors/core/data_channel.hpp"
#include "test/actors/core/core_port_fixture.hpp"
#include "test/support/counting_new.hpp"

namespace {

struct data_fixture : core_port_fixture {
  data_channel data{core};

  /// An OK SendDataResponse to our request `i`.
  void ok(size_t i) {
    auto res = pb::make_send_data_response(
        core.requests[i].request().request_id(), pb::OK, {});
    core.answers[i](&res.response(), caf::none);
  }

  /// The peer's eager SendData `id` carrying `payload`, as the responder
  /// hands it over: the frame in a receive buffer.
  void peer_sends(uint64_t id, const std::string& payload,
                  pb::SendData req = {}) {
    auto [buf, frame] = peer_frame(id, payload, std::move(req));
    data.on_send_data(id, frame.msg.request().send_data(), buf, frame.view);
  }

  /// A decoded frame of the peer and where its payload lies.
  struct decoded {
    pb::Message msg;
    pb::decode_result view;
  };

  /// The peer's eager SendData `id` carrying `payload` in a receive buffer
  /// of its own, and the frame decoded.
  std::pair<local_mr, decoded>
  peer_frame(uint64_t id, const std::string& payload, pb::SendData req = {}) {
    req.set_len(payload.size());
    pb::Message msg;
    auto* r = msg.mutable_request();
    r->set_request_id(id);
    *r->mutable_send_data() = req;
    auto header = pb::frame_header_len + msg.ByteSizeLong();
    auto buf = pool->allocate(header + payload.size(), 64,
                              transport::access::local_write);
    BOOST_REQUIRE(buf);
    pb::decode_result frame;
    frame.code = errc::none;
    auto res = pb::encode(msg, buf->data(), buf->size(), max_message_len);
    BOOST_REQUIRE(res.code == errc::none);
    std::memcpy(buf->data() + res.header_len, payload.data(), payload.size());
    frame.payload = buf->data() + res.header_len;
    frame.payload_len = payload.size();
    return {std::move(*buf), decoded{std::move(msg), frame}};
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(data_channel_alone, data_fixture)

// A transfer goes in chunks of the max message length, a window at a
// time; `done` gets the byte count after the last acknowledgement.
BOOST_AUTO_TEST_CASE(a_transfer_goes_in_chunks_and_ends_with_the_last_ack) {
  auto mr = pool->allocate(10000, 64, transport::access::local_write);
  BOOST_REQUIRE(mr);
  std::optional<caf::expected<uint64_t>> got;
  data.send(*mr, core.now_, [&](caf::expected<uint64_t> x) { got = x; });
  BOOST_REQUIRE_EQUAL(core.requests.size(), 3u); // 4096-byte frames
  uint64_t sum = 0;
  for (auto& p : core.payloads)
    sum += p.size();
  BOOST_TEST(sum == 10000u);
  ok(0);
  ok(1);
  BOOST_TEST(!got);
  ok(2);
  BOOST_REQUIRE(got && *got);
  BOOST_TEST(**got == 10000u);
}

BOOST_AUTO_TEST_CASE(a_refused_chunk_ends_the_transfer_with_the_peers_code) {
  auto mr = pool->allocate(100, 64, transport::access::local_write);
  BOOST_REQUIRE(mr);
  std::optional<caf::expected<uint64_t>> got;
  data.send(*mr, core.now_, [&](caf::expected<uint64_t> x) { got = x; });
  auto res = pb::make_send_data_response(
      core.requests[0].request().request_id(), pb::QUOTA_EXCEEDED, "full");
  core.answers[0](&res.response(), caf::none);
  BOOST_REQUIRE(got && !*got);
  BOOST_TEST(got->error().code() == static_cast<uint8_t>(errc::quota_exceeded));
}

// A peer that takes cumulative acknowledgements gets one response for
// the chunks of one activation.
BOOST_AUTO_TEST_CASE(the_peers_chunks_are_delivered_and_acked_together) {
  data.peer_hello(true, 0);
  peer_sends(7, "abc");
  peer_sends(8, "defg");
  BOOST_REQUIRE_EQUAL(out.data.size(), 2u);
  BOOST_TEST(out.data[1].size() == 4u);
  BOOST_TEST(core.unsolicited.empty());
  BOOST_TEST(out.ack_flushes == 1);
  data.flush_acks();
  BOOST_REQUIRE_EQUAL(core.unsolicited.size(), 1u);
  const auto& res = core.unsolicited[0].response();
  BOOST_TEST(res.request_id() == 7u);
  BOOST_REQUIRE_EQUAL(res.send_data().also_acked_size(), 1);
  BOOST_TEST(res.send_data().also_acked(0) == 8u);
}

BOOST_AUTO_TEST_CASE(a_peer_without_cumulative_acks_gets_one_each) {
  peer_sends(7, "abc");
  BOOST_REQUIRE_EQUAL(core.unsolicited.size(), 1u);
  BOOST_TEST(core.unsolicited[0].response().request_id() == 7u);
}

BOOST_AUTO_TEST_CASE(a_chunk_over_the_queue_budget_is_refused) {
  core.opts_.peer_max_queued_bytes = 5;
  peer_sends(7, "abc");
  peer_sends(8, "defg");
  BOOST_TEST(out.data.size() == 1u);
  BOOST_REQUIRE_EQUAL(core.rejected.size(), 1u);
  BOOST_TEST(core.rejected[0].response().send_data().status()
             == pb::QUOTA_EXCEEDED);
}

// With EXT_PIGGYBACK_ACKS the gathered acknowledgements ride on our next
// SendData instead of a response of their own.
BOOST_AUTO_TEST_CASE(acks_ride_on_our_next_send) {
  core.offered_ |= pb::EXT_PIGGYBACK_ACKS;
  data.peer_hello(true, 0);
  peer_sends(7, "abc");
  BOOST_TEST(data.acks_may_ride());
  auto mr = pool->allocate(16, 64, transport::access::local_write);
  BOOST_REQUIRE(mr);
  data.send(*mr, core.now_, [](caf::expected<uint64_t>) {});
  BOOST_REQUIRE_EQUAL(core.requests.size(), 1u);
  const auto& sd = core.requests[0].request().send_data();
  BOOST_REQUIRE_EQUAL(sd.acked_size(), 1);
  BOOST_TEST(sd.acked(0) == 7u);
  BOOST_TEST(!data.acks_may_ride());
  data.flush_acks();
  BOOST_TEST(core.unsolicited.empty());
  BOOST_TEST(core.counters_.piggybacked_acks_sent == 1u);
}

// The peer's SendData acknowledges requests of ours through the core.
BOOST_AUTO_TEST_CASE(the_peers_piggybacked_acks_complete_ours) {
  pb::SendData req;
  req.add_acked(3);
  req.add_acked(4);
  data.on_piggybacked_acks(req);
  BOOST_TEST(core.acked_ours == (std::vector<uint64_t>{3, 4}));
  BOOST_TEST(core.counters_.piggybacked_acks_received == 2u);
}

// Over the eager size to a peer that reads: one request naming our memory.
BOOST_AUTO_TEST_CASE(a_large_payload_to_a_reading_peer_goes_by_rendezvous) {
  core.offered_ |= pb::EXT_RENDEZVOUS;
  data.peer_hello(true, 1 << 20);
  BOOST_TEST(data.rendezvous_to_peer());
  auto mr = pool->allocate(100000, 64, transport::access::local_write);
  BOOST_REQUIRE(mr);
  data.send(*mr, core.now_, [](caf::expected<uint64_t>) {});
  BOOST_REQUIRE_EQUAL(core.requests.size(), 1u);
  const auto& sd = core.requests[0].request().send_data();
  BOOST_REQUIRE(sd.has_source());
  BOOST_TEST(sd.source().len() == 100000u);
  BOOST_TEST(core.counters_.rendezvous_sent == 1u);
}

// Issue 41's rule for the data path: once warm, an echo (the peer's
// chunk delivered zero-copy and acknowledged on our reply, our reply sent
// and answered) allocates nothing: the stream's memory is recycled, the
// chunk's completion lives in place, the chunk is a view of the receive
// buffer, the header buffer comes back.
BOOST_AUTO_TEST_CASE(a_warm_echo_allocates_nothing) {
  core.offered_ |= pb::EXT_PIGGYBACK_ACKS;
  core.keep_messages = false;
  data.peer_hello(true, 0);
  constexpr uint64_t rounds = 1000;
  constexpr uint64_t warm_up = 50;
  core.answers.reserve(1);
  core.payloads.reserve(rounds + warm_up);
  out.data.reserve(4);
  auto reply = pool->allocate(8, 64, transport::access::local_write);
  BOOST_REQUIRE(reply);
  auto [buf, frame] = peer_frame(1, "12345678");
  const auto& req = frame.msg.request().send_data();
  auto ok = pb::make_send_data_response(0, pb::OK, {});
  uint64_t sent = 0;
  auto echo = [&](uint64_t id) {
    data.on_send_data(id, req, buf, frame.view);
    BOOST_REQUIRE_EQUAL(out.data.size(), 1u);
    BOOST_REQUIRE(out.data[0].data() == frame.view.payload); // zero-copy
    data.send(*reply, core.now_,
              [&sent](caf::expected<uint64_t> n) { sent += n ? *n : 0; });
    // As request_table::complete: the completion leaves its slot first.
    auto answer = std::move(core.answers.back());
    core.answers.pop_back();
    answer(&ok.response(), caf::none);
    out.data.clear(); // the handler let go of the chunk
    out.queued_bytes = 0;
  };
  for (uint64_t id = 1; id <= warm_up; ++id)
    echo(id);
  auto before = test::heap_allocations.load();
  for (uint64_t id = warm_up + 1; id <= warm_up + rounds; ++id)
    echo(id);
  BOOST_TEST(test::heap_allocations.load() - before == 0u);
  BOOST_TEST(sent == (warm_up + rounds) * 8);
  // Every acknowledgement rode on a reply: none needed a frame of its own.
  BOOST_TEST(core.counters_.piggybacked_acks_sent == warm_up + rounds);
  BOOST_TEST(core.unsolicited_count == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
