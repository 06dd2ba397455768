#include <boost/test/unit_test.hpp>

// The suite `hostile_requests`: a scripted raw peer on the deterministic
// harness (test/support/scripted_peer.hpp) sends hostile memory and data
// requests, garbage frames and too many violations, or never answers;
// each case ends in a documented error answer or a counted drop, and the
// agent serves on (or ends the connection and gives every byte back).

#include <set>
#include <string>
#include <vector>

#include "common/tuning.hpp"
#include "test/support/scripted_peer.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(hostile_requests)

BOOST_AUTO_TEST_CASE(release_of_an_unknown_token_is_an_error_answer) {
  scripted_peer p;
  auto id = p.next_id++;
  p.send(pb::make_release_mr(id, pb::make_token(0xdead000, 64, 77)));
  auto res = p.next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::UNKNOWN_TOKEN);
  BOOST_TEST(p.stats().rejected_requests == 1u);
  p.expect_still_serving();
}

BOOST_AUTO_TEST_CASE(send_mr_remote_of_a_token_not_owned_is_an_error_answer) {
  scripted_peer p;
  auto id = p.next_id++;
  p.send(pb::make_send_mr(id, pb::SendMR::REMOTE, pb::make_token(4096, 64, 1)));
  auto res = p.next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::NOT_OWNED);
  BOOST_TEST(p.stats().rejected_requests == 1u);
  p.expect_still_serving();
}

BOOST_AUTO_TEST_CASE(absurd_layouts_are_error_answers) {
  scripted_peer p;
  const auto start = p.agent_bytes();
  struct layout_case {
    uint64_t size;
    uint64_t align;
    pb::Status status;
  };
  for (auto c : {layout_case{64, 0, pb::INVALID_LAYOUT},
                 layout_case{64, 3, pb::INVALID_LAYOUT},
                 layout_case{uint64_t{1} << 62, 8, pb::SIZE_LIMIT},
                 layout_case{~uint64_t{0}, 1, pb::SIZE_LIMIT}}) {
    auto id = p.next_id++;
    p.send(pb::make_alloc_mr(id, c.size, c.align));
    auto res = p.next_response();
    BOOST_TEST(res.request_id() == id);
    BOOST_TEST(pb::status_of(res) == c.status);
  }
  BOOST_TEST(p.agent_bytes() == start);
  BOOST_TEST(p.stats().owned_mrs == 0u);
  p.expect_still_serving();
}

BOOST_AUTO_TEST_CASE(send_data_with_a_wrong_length_is_an_error_answer) {
  scripted_peer p;
  auto id = p.next_id++;
  p.send(pb::make_send_data(id, 100), 50); // says 100, carries 50
  auto res = p.next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::LENGTH_MISMATCH);
  BOOST_TEST(p.stats().queued_data == 0u);
  p.expect_still_serving();
}

BOOST_AUTO_TEST_CASE(garbage_frames_are_dropped_and_counted) {
  scripted_peer p;
  p.send_raw(std::vector<uint8_t>(64, 0xff));            // length over the max
  p.send_raw(std::vector<uint8_t>{3, 0, 0, 0, 1, 2, 3}); // not protobuf
  p.send_raw(std::vector<uint8_t>{1, 0});                // truncated header
  pb::Message unknown_response;
  unknown_response.mutable_response()->set_request_id(987654321);
  unknown_response.mutable_response()->mutable_send_data();
  p.send(unknown_response); // answers nothing the agent asked
  p.h.settle();
  BOOST_TEST(p.stats().protocol_errors == 4u);
  // Dropped: none of them got an answer.
  for (auto& f : p.inbox)
    BOOST_TEST(!f.msg.has_response());
  p.expect_still_serving();
}

// A peer whose Hello did not offer cumulative acknowledgements (this peer
// sends no Hello at all, like an async-rdma peer) gets one
// SendDataResponse per SendData, each naming only its own request.
BOOST_AUTO_TEST_CASE(a_peer_without_the_offer_gets_one_response_per_send_data) {
  scripted_peer p;
  std::set<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    ids.insert(p.next_id);
    p.send(pb::make_send_data(p.next_id++, 100), 100);
  }
  for (int i = 0; i < 4; ++i) {
    auto res = p.next_response();
    BOOST_TEST(ids.erase(res.request_id()) == 1u);
    BOOST_TEST(pb::status_of(res) == pb::OK);
    BOOST_TEST(res.send_data().also_acked_size() == 0);
  }
  BOOST_TEST(ids.empty());
  BOOST_TEST(p.stats().merged_acks_sent == 0u);
  BOOST_TEST(p.stats().queued_data == 4u);
}

// -- packed frames ------------------------------------------------------------

namespace {

/// The frames of `msgs` packed into one message (EXT_PACKED_FRAMES), each
/// followed by `payload` bytes (a SendData's, 0 for the others).
std::vector<uint8_t> packed(const std::vector<pb::Message>& msgs,
                            size_t payload = 0) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < msgs.size(); ++i) {
    std::vector<uint8_t> buf(pb::frame_header_len + msgs[i].ByteSizeLong());
    auto res = pb::encode(msgs[i], buf.data(), buf.size(), buf.size());
    BOOST_REQUIRE(res.code == errc::none);
    if (i + 1 < msgs.size())
      pb::mark_more_frames(buf.data());
    out.insert(out.end(), buf.begin(), buf.end());
    out.insert(out.end(), payload, uint8_t{0x5a});
  }
  return out;
}

} // namespace

// A peer that offers packed frames may pack its requests: each is served,
// in order, and the answers of one activation come back packed; more than
// max_packed_frames in one message is a violation, and the frames beyond
// the cap are not served.
BOOST_AUTO_TEST_CASE(packed_requests_are_served_in_order_up_to_the_cap) {
  scripted_peer p;
  p.send(pb::make_hello(pb::protocol_version, p.opts.max_message_len_bytes,
                        p.opts.recv_depth, true, pb::EXT_PACKED_FRAMES));
  std::vector<pb::Message> reqs;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(p.next_id);
    reqs.push_back(
        pb::make_release_mr(p.next_id++, pb::make_token(0xdead000, 64, 77)));
  }
  p.send_raw(packed(reqs));
  for (auto id : ids) {
    auto res = p.next_response();
    BOOST_TEST(res.request_id() == id);
    BOOST_TEST(pb::status_of(res) == pb::UNKNOWN_TOKEN);
  }
  auto stats = p.stats();
  BOOST_TEST(stats.rejected_requests == 5u);
  BOOST_TEST(stats.packed_messages_sent >= 1u);
  BOOST_TEST(stats.protocol_errors == 0u);
  // One frame over the cap: 1-byte SendData chunks, served up to it.
  reqs.clear();
  for (size_t i = 0; i <= tuning::max_packed_frames; ++i)
    reqs.push_back(pb::make_send_data(p.next_id++, 1));
  p.send_raw(packed(reqs, 1));
  p.h.settle();
  stats = p.stats();
  BOOST_TEST(stats.protocol_errors == 1u);
  BOOST_TEST(stats.queued_data == tuning::max_packed_frames);
  p.expect_still_serving();
}

// -- cumulative acknowledgements ----------------------------------------------

// With the offer, every SendData is acknowledged exactly once, OK, and the
// responses may each cover several (at most max_acks_per_response).
BOOST_AUTO_TEST_CASE(a_peer_with_the_offer_gets_every_send_data_acked_once) {
  scripted_peer p;
  p.send(pb::make_hello(pb::protocol_version, p.opts.max_message_len_bytes,
                        p.opts.recv_depth, true));
  const int groups = 5;
  const int group = 8;
  const int count = groups * group;
  size_t frames = 0;
  for (int g = 0; g < groups; ++g) {
    std::set<uint64_t> ids;
    for (int i = 0; i < group; ++i) {
      ids.insert(p.next_id);
      p.send(pb::make_send_data(p.next_id++, 100), 100);
    }
    while (!ids.empty()) {
      auto res = p.next_response();
      ++frames;
      BOOST_TEST(pb::status_of(res) == pb::OK);
      BOOST_TEST(res.send_data().also_acked_size() + 1
                 <= int(tuning::max_acks_per_response));
      BOOST_TEST(ids.erase(res.request_id()) == 1u);
      for (auto id : res.send_data().also_acked())
        BOOST_TEST(ids.erase(id) == 1u);
    }
  }
  BOOST_TEST(frames <= size_t(count));
  BOOST_TEST_MESSAGE(count << " SendData acknowledged in " << frames
                           << " responses");
  BOOST_TEST(p.stats().merged_acks_sent == count - frames);
  p.expect_still_serving();
}

// The agent takes cumulative acknowledgements: one response completes
// several chunks of one send_data; ids it does not know are counted and
// dropped, like any unknown id.
BOOST_AUTO_TEST_CASE(one_cumulative_response_completes_several_chunks) {
  scripted_peer p;
  auto mr = p.h.alloc(p.agent, 10000);
  auto sent = p.h.ask<uint64_t>(p.agent, send_data_atom::value, mr);
  // 10000 bytes in chunks of at most 4096 bytes minus the frame overhead.
  std::vector<uint64_t> ids;
  uint64_t bytes = 0;
  while (bytes < 10000) {
    auto req = p.next_request();
    BOOST_REQUIRE(req.has_send_data());
    ids.push_back(req.request_id());
    bytes += req.send_data().len();
  }
  BOOST_REQUIRE(ids.size() >= 3u);
  BOOST_TEST(!sent->done); // nothing acknowledged yet
  ids.push_back(777);      // unknown
  auto before = p.stats().protocol_errors;
  p.send(pb::make_send_data_acks(ids));
  p.h.settle();
  auto n = agent_harness::take(*sent);
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_TEST(*n == 10000u);
  auto s = p.stats();
  BOOST_TEST(s.merged_acks_received == ids.size() - 2);
  BOOST_TEST(s.protocol_errors == before + 1);
}

// -- quotas -------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(alloc_over_the_peer_quota_is_refused_other_peers_not) {
  scripted_peer p;
  std::vector<pb::MrToken> tokens;
  for (uint32_t i = 0; i < p.opts.peer_max_mrs; ++i) {
    p.send(pb::make_alloc_mr(p.next_id++, 1000, 8));
    auto res = p.next_response();
    BOOST_REQUIRE(pb::status_of(res) == pb::OK);
    tokens.push_back(res.alloc_mr().token());
  }
  p.send(pb::make_alloc_mr(p.next_id++, 1000, 8));
  BOOST_TEST(pb::status_of(p.next_response()) == pb::QUOTA_EXCEEDED);
  BOOST_TEST(p.stats().peer_alloc_bytes == p.opts.peer_max_mrs * 1000u);
  // Another connection of the same side is unaffected.
  auto [client, server] = p.h.connect();
  auto rmr = p.h.call<remote_mr>(client, request_remote_mr_atom::value,
                                 uint64_t{1000}, uint64_t{8});
  BOOST_TEST(render(rmr) == "ok");
  // Releasing one makes room again.
  p.send(pb::make_release_mr(p.next_id++, tokens.back()));
  BOOST_TEST(pb::status_of(p.next_response()) == pb::OK);
  p.send(pb::make_alloc_mr(p.next_id++, 1000, 8));
  BOOST_TEST(pb::status_of(p.next_response()) == pb::OK);
}

// -- leaving and limits ------------------------------------------------------

BOOST_AUTO_TEST_CASE(memory_allocated_for_a_peer_returns_when_it_goes) {
  scripted_peer p;
  const auto start = p.agent_bytes();
  for (int i = 0; i < 5; ++i) {
    p.send(pb::make_alloc_mr(p.next_id++, 100000, 64));
    BOOST_TEST(pb::status_of(p.next_response()) == pb::OK);
  }
  BOOST_TEST(p.agent_bytes() >= start + 500000u);
  BOOST_TEST(p.stats().owned_mrs == 5u);
  auto down = p.h.watch(p.agent);
  p.fail_link(); // the peer leaves
  BOOST_REQUIRE(down->down);
  BOOST_TEST(code_of(down->reason) == errc::peer_gone, render(down->reason));
  BOOST_TEST(p.agent_bytes() == 0u);
}

BOOST_AUTO_TEST_CASE(unclaimed_data_over_the_limit_is_refused) {
  scripted_peer p;
  const size_t chunk = 4000;
  size_t accepted = 0;
  pb::Status last = pb::OK;
  for (int i = 0; i < 20 && last == pb::OK; ++i) {
    p.send(pb::make_send_data(p.next_id++, chunk), chunk);
    last = pb::status_of(p.next_response());
    if (last == pb::OK)
      accepted += chunk;
  }
  BOOST_TEST(last == pb::QUOTA_EXCEEDED);
  BOOST_TEST(accepted == p.opts.peer_max_queued_bytes / chunk * chunk);
  BOOST_TEST(p.stats().queued_data_bytes == accepted);
  { // claiming data makes room
    auto got = p.h.call<local_mr>(p.agent, receive_data_atom::value);
    BOOST_REQUIRE_MESSAGE(got, render(got));
    BOOST_TEST(got->size() == chunk);
  }
  p.send(pb::make_send_data(p.next_id++, chunk), chunk);
  BOOST_TEST(pb::status_of(p.next_response()) == pb::OK);
  BOOST_TEST(p.stats().queued_data_bytes == accepted);
}

BOOST_AUTO_TEST_CASE(a_peer_that_keeps_violating_is_disconnected) {
  scripted_peer p;
  auto down = p.h.watch(p.agent);
  for (uint32_t i = 0; i + 1 < p.opts.peer_max_violations; ++i)
    p.send(pb::make_release_mr(p.next_id++, pb::make_token(64, 64, 1)));
  p.h.settle();
  BOOST_TEST(!down->down); // one short of the limit
  p.send(pb::make_release_mr(p.next_id++, pb::make_token(64, 64, 1)));
  p.h.settle();
  BOOST_REQUIRE(down->down);
  BOOST_TEST(code_of(down->reason) == errc::peer_gone, render(down->reason));
  BOOST_TEST(render(down->reason).find("peer-max-violations")
                 != std::string::npos,
             render(down->reason));
  BOOST_TEST(p.agent_bytes() == 0u);
}

// The peer takes the agent's AllocMR requests and never answers: past
// peer-max-pending-requests a request fails at once, and the others time
// out at request-timeout-ms on the simulated clock.
BOOST_AUTO_TEST_CASE(a_peer_that_never_answers_hits_timeouts_and_limits) {
  scripted_peer p;
  std::vector<std::shared_ptr<pending_reply<remote_mr>>> asked;
  for (uint32_t i = 0; i < p.opts.peer_max_pending_requests; ++i)
    asked.push_back(p.h.ask<remote_mr>(p.agent, request_remote_mr_atom::value,
                                       uint64_t{64}, uint64_t{8}));
  // One more than the limit fails at once.
  auto over = p.h.call<remote_mr>(p.agent, request_remote_mr_atom::value,
                                  uint64_t{64}, uint64_t{8});
  BOOST_REQUIRE(!over);
  BOOST_TEST(code_of(over.error()) == errc::quota_exceeded);
  for (uint32_t i = 0; i < p.opts.peer_max_pending_requests; ++i)
    BOOST_TEST(p.next_request().has_alloc_mr());
  p.h.advance(p.opts.request_timeout_ms / 2);
  for (auto& a : asked)
    BOOST_TEST(!a->done);
  BOOST_TEST(p.stats().pending_requests == p.opts.peer_max_pending_requests);
  p.h.advance(p.opts.request_timeout_ms);
  for (auto& a : asked) {
    auto r = agent_harness::take(*a);
    BOOST_REQUIRE_MESSAGE(!r, "the silent peer answered");
    BOOST_TEST(code_of(r.error()) == errc::request_timeout, render(r.error()));
  }
  BOOST_TEST(p.stats().pending_requests == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
