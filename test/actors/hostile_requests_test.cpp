#include <boost/test/unit_test.hpp>

// The hostile suite, requests: error answers to hostile memory and data
// requests, garbage frames, cumulative acknowledgements, quotas, repeated
// violations and a peer that never answers.

#include <future>
#include <set>
#include <string>
#include <vector>

#include "common/tuning.hpp"
#include "test/actors/hostile_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_FIXTURE_TEST_SUITE(hostile, raw_peer_fixture)

BOOST_AUTO_TEST_CASE(release_of_an_unknown_token_is_an_error_answer) {
  auto id = next_id++;
  send(pb::make_release_mr(id, pb::make_token(0xdead000, 64, 77)));
  auto res = next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::UNKNOWN_TOKEN);
  BOOST_TEST(server_stats().rejected_requests == 1u);
  expect_still_serving();
}

BOOST_AUTO_TEST_CASE(send_mr_remote_of_a_token_not_owned_is_an_error_answer) {
  auto id = next_id++;
  send(pb::make_send_mr(id, pb::SendMR::REMOTE, pb::make_token(4096, 64, 1)));
  auto res = next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::NOT_OWNED);
  expect_still_serving();
}

BOOST_AUTO_TEST_CASE(absurd_layouts_are_error_answers) {
  struct layout_case {
    uint64_t size;
    uint64_t align;
    pb::Status status;
  };
  for (auto c : {layout_case{64, 0, pb::INVALID_LAYOUT},
                 layout_case{64, 3, pb::INVALID_LAYOUT},
                 layout_case{uint64_t{1} << 62, 8, pb::SIZE_LIMIT},
                 layout_case{~uint64_t{0}, 1, pb::SIZE_LIMIT}}) {
    auto id = next_id++;
    send(pb::make_alloc_mr(id, c.size, c.align));
    auto res = next_response();
    BOOST_TEST(res.request_id() == id);
    BOOST_TEST(pb::status_of(res) == c.status);
  }
  BOOST_TEST(server->memory_stats().bytes_in_use == 0u);
  expect_still_serving();
}

BOOST_AUTO_TEST_CASE(send_data_with_a_wrong_length_is_an_error_answer) {
  auto id = next_id++;
  send(pb::make_send_data(id, 100), 50); // says 100, carries 50
  auto res = next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::LENGTH_MISMATCH);
  BOOST_TEST(server_stats().queued_data == 0u);
  expect_still_serving();
}

BOOST_AUTO_TEST_CASE(garbage_frames_are_dropped_and_counted) {
  send_raw(std::vector<uint8_t>(64, 0xff));            // length over the max
  send_raw(std::vector<uint8_t>{3, 0, 0, 0, 1, 2, 3}); // not protobuf
  send_raw(std::vector<uint8_t>{1, 0});                // truncated header
  pb::Message unknown_response;
  unknown_response.mutable_response()->set_request_id(987654321);
  unknown_response.mutable_response()->mutable_send_data();
  send(unknown_response); // answers nothing we asked
  BOOST_TEST(eventually([&] { return server_stats().protocol_errors == 4; }));
  expect_still_serving();
}

// -- cumulative acknowledgements ----------------------------------------------

// A peer whose Hello did not offer cumulative acknowledgements (this raw
// peer sends no Hello at all, like an async-rdma peer) gets one
// SendDataResponse per SendData, each naming only its own request.
BOOST_AUTO_TEST_CASE(a_peer_without_the_offer_gets_one_response_per_send_data) {
  std::set<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    ids.insert(next_id);
    send(pb::make_send_data(next_id++, 100), 100);
  }
  for (int i = 0; i < 4; ++i) {
    auto res = next_response();
    BOOST_TEST(ids.erase(res.request_id()) == 1u);
    BOOST_TEST(pb::status_of(res) == pb::OK);
    BOOST_TEST(res.send_data().also_acked_size() == 0);
  }
  BOOST_TEST(server_stats().merged_acks_sent == 0u);
}

// With the offer, every SendData is acknowledged exactly once, OK, and the
// responses may each cover several (at most max_acks_per_response).
BOOST_AUTO_TEST_CASE(a_peer_with_the_offer_gets_every_send_data_acked_once) {
  send(pb::make_hello(pb::protocol_version, opts.max_message_len_bytes,
                      opts.recv_depth, true));
  // In groups of 8 (half the receive pool): this peer reads the responses
  // only after each group, and its unread responses hold its receive
  // buffers, i.e. the agent's credits.
  const int groups = 5;
  const int group = 8;
  const int count = groups * group;
  size_t frames = 0;
  for (int g = 0; g < groups; ++g) {
    std::set<uint64_t> ids;
    for (int i = 0; i < group; ++i) {
      ids.insert(next_id);
      send(pb::make_send_data(next_id++, 100), 100);
    }
    while (!ids.empty()) {
      auto res = next_response();
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
  BOOST_TEST(server_stats().merged_acks_sent == count - frames);
  expect_still_serving();
}

// Our side takes cumulative acknowledgements: one response completes
// several chunks of one send_data; ids it does not know are counted and
// dropped, like any unknown id.
BOOST_AUTO_TEST_CASE(one_cumulative_response_completes_several_chunks) {
  auto mr = call<local_mr>(sys, server_conn, alloc_local_mr_atom::value,
                           uint64_t{10000}, uint64_t{64});
  BOOST_REQUIRE(mr);
  // The user's call blocks on another thread while this one plays the peer.
  auto sent = std::async(std::launch::async, [&] {
    return call<uint64_t>(sys, server_conn, send_data_atom::value, *mr);
  });
  // 10000 bytes in chunks of at most 4096 bytes minus the frame overhead.
  std::vector<uint64_t> ids;
  uint64_t bytes = 0;
  while (bytes < 10000) {
    auto req = next_request();
    BOOST_REQUIRE(req.has_send_data());
    ids.push_back(req.request_id());
    bytes += req.send_data().len();
  }
  BOOST_REQUIRE(ids.size() >= 3u);
  ids.push_back(777); // unknown
  auto before = server_stats().protocol_errors;
  send(pb::make_send_data_acks(ids));
  auto n = sent.get();
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_TEST(*n == 10000u);
  auto s = server_stats();
  BOOST_TEST(s.merged_acks_received == ids.size() - 2);
  BOOST_TEST(s.protocol_errors == before + 1);
}

BOOST_AUTO_TEST_CASE(memory_allocated_for_a_peer_returns_when_it_goes) {
  for (int i = 0; i < 5; ++i) {
    auto id = next_id++;
    send(pb::make_alloc_mr(id, 100000, 64));
    BOOST_TEST(pb::status_of(next_response()) == pb::OK);
  }
  BOOST_TEST(server->memory_stats().bytes_in_use >= 500000u);
  BOOST_TEST(server_stats().owned_mrs == 5u);
  caf::scoped_actor watcher{sys};
  watcher->monitor(server_conn);
  caf::anon_send_exit(tr, caf::exit_reason::user_shutdown); // peer leaves
  watcher->receive([&](caf::down_msg& down) {
    BOOST_TEST(code_of(down.reason) == errc::peer_gone);
  });
  BOOST_TEST(
      eventually([&] { return server->memory_stats().bytes_in_use == 0; }));
}

BOOST_AUTO_TEST_CASE(alloc_over_the_peer_quota_is_refused_other_peers_not) {
  std::vector<pb::MrToken> tokens;
  for (uint32_t i = 0; i < opts.peer_max_mrs; ++i) {
    auto id = next_id++;
    send(pb::make_alloc_mr(id, 1000, 8));
    auto res = next_response();
    BOOST_REQUIRE(pb::status_of(res) == pb::OK);
    tokens.push_back(res.alloc_mr().token());
  }
  auto id = next_id++;
  send(pb::make_alloc_mr(id, 1000, 8));
  BOOST_TEST(pb::status_of(next_response()) == pb::QUOTA_EXCEEDED);
  BOOST_TEST(server_stats().peer_alloc_bytes == opts.peer_max_mrs * 1000u);
  // Another peer is unaffected.
  auto other = node::open(sys, opts);
  BOOST_REQUIRE(other);
  auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
  auto port
      = server->listen(host + ":0", caf::actor_cast<caf::actor>(acceptor));
  BOOST_REQUIRE(port);
  auto conn = (*other)->connect(host + ":" + std::to_string(*port));
  BOOST_REQUIRE(conn);
  auto rmr = call<remote_mr>(sys, *conn, request_remote_mr_atom::value,
                             uint64_t{1000}, uint64_t{8});
  BOOST_TEST(render(rmr) == "ok");
  // Releasing one makes room again.
  send(pb::make_release_mr(next_id++, tokens.back()));
  BOOST_TEST(pb::status_of(next_response()) == pb::OK);
  send(pb::make_alloc_mr(next_id++, 1000, 8));
  BOOST_TEST(pb::status_of(next_response()) == pb::OK);
  (*other)->close();
}

BOOST_AUTO_TEST_CASE(unclaimed_data_over_the_limit_is_refused) {
  const size_t chunk = 4000;
  size_t accepted = 0;
  pb::Status last = pb::OK;
  for (int i = 0; i < 20 && last == pb::OK; ++i) {
    send(pb::make_send_data(next_id++, chunk), chunk);
    last = pb::status_of(next_response());
    if (last == pb::OK)
      accepted += chunk;
  }
  BOOST_TEST(last == pb::QUOTA_EXCEEDED);
  BOOST_TEST(accepted == opts.peer_max_queued_bytes / chunk * chunk);
  BOOST_TEST(server_stats().queued_data_bytes == accepted);
  // Claiming data makes room.
  auto got = call<local_mr>(sys, server_conn, receive_data_atom::value);
  BOOST_REQUIRE(got);
  send(pb::make_send_data(next_id++, chunk), chunk);
  BOOST_TEST(pb::status_of(next_response()) == pb::OK);
}

BOOST_AUTO_TEST_CASE(a_peer_that_keeps_violating_is_disconnected) {
  caf::scoped_actor watcher{sys};
  watcher->monitor(server_conn);
  for (uint32_t i = 0; i < opts.peer_max_violations; ++i)
    send(pb::make_release_mr(next_id++, pb::make_token(64, 64, 1)));
  watcher->receive(
      [&](caf::down_msg& down) {
        BOOST_TEST(code_of(down.reason) == errc::peer_gone);
        BOOST_TEST(render(down.reason).find("peer-max-violations")
                   != std::string::npos);
      },
      caf::after(std::chrono::seconds(10)) >>
          [] { BOOST_FAIL("the violating peer was not disconnected"); });
  BOOST_TEST(
      eventually([&] { return server->memory_stats().bytes_in_use == 0; }));
}

BOOST_AUTO_TEST_CASE(a_peer_that_never_answers_hits_timeouts_and_limits) {
  caf::scoped_actor user{sys};
  for (uint32_t i = 0; i < opts.peer_max_pending_requests; ++i)
    user->send(server_conn, request_remote_mr_atom::value, uint64_t{64},
               uint64_t{8});
  // One more than the limit fails at once.
  auto over = call<remote_mr>(sys, server_conn, request_remote_mr_atom::value,
                              uint64_t{64}, uint64_t{8});
  BOOST_REQUIRE(!over);
  BOOST_TEST(code_of(over.error()) == errc::quota_exceeded);
  // The others time out after request-timeout-ms.
  uint32_t timeouts = 0;
  user->receive_for(timeouts, opts.peer_max_pending_requests)(
      [&](caf::error& err) {
        BOOST_TEST(code_of(err) == errc::request_timeout);
      },
      [](remote_mr&) { BOOST_FAIL("the silent peer answered"); },
      caf::after(std::chrono::seconds(10)) >> [] { BOOST_FAIL("no timeout"); });
  auto s = server_stats();
  BOOST_TEST(s.pending_requests == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
