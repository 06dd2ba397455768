// The shared receive queue (fabric.hpp, `shared_receive_queue`), written
// against the fabric interface only: the verbs suite runs it too.

#include <algorithm>
#include <atomic>
#include <cstring>

#include "test/transport/fabric_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

constexpr uint32_t slot = 4096;

/// A device whose queue pairs share `srq`, and its receive buffers.
struct srq_fixture : fabric_fixture {
  transport::srq_ptr srq;
  std::optional<reg_buffer> dst;

  void open_shared(uint32_t max_wr, uint32_t rnr_timeout_ms = 2000) {
    auto& d = open(rnr_timeout_ms);
    srq = value_or_throw(d.create_srq(max_wr), "create_srq");
    srq->set_buffers({}, slot);
    d.share_receives(srq);
    dst = make_buffer(d, size_t{slot} * max_wr, local_write, 0xEE);
  }

  void post_shared(uint64_t wr_id, size_t index) {
    auto sg = dst->sge_of(index * slot, slot);
    auto err = srq->post_recv(wr_id, &sg, 1);
    BOOST_REQUIRE_MESSAGE(!err, render(err));
  }

  /// Sends `len` bytes of the pattern `seed` from `from`.
  void send(transport::queue_pair& from, reg_buffer& src, uint32_t seed,
            size_t len, uint64_t wr_id) {
    fill_pattern(src.data(), len, seed);
    auto sg = src.sge_of(0, len);
    auto err = from.post_send(wr_id, &sg, 1);
    BOOST_REQUIRE_MESSAGE(!err, render(err));
    auto wc = one_completion(from);
    BOOST_TEST(wc.status == wc_status::success);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(fabric_srq, srq_fixture)

// Two connections of one device take their receives from one queue: each
// message lands in the oldest receive, whichever connection it came on, and
// completes in the CQ of that connection.
BOOST_AUTO_TEST_CASE(connections_take_the_oldest_shared_receive) {
  open_shared(8);
  conn_params offer{slot, 16};
  auto a = connect_pair(*dev, offer);
  auto b = connect_pair(*dev, offer);
  BOOST_TEST(a.server->srq() == srq);
  BOOST_TEST(b.server->srq() == srq);
  for (uint64_t i = 0; i < 3; ++i)
    post_shared(100 + i, i);
  auto src = make_buffer(*dev, slot, 0);
  send(*a.client, src, 1, 100, 1);
  auto wc = one_completion(*a.server);
  BOOST_TEST(wc.status == wc_status::success);
  BOOST_TEST(wc.opcode == wc_opcode::recv);
  BOOST_TEST(wc.wr_id == 100u);
  BOOST_TEST(wc.byte_len == 100u);
  BOOST_TEST(has_pattern(dst->data(), 100, 1));
  send(*b.client, src, 2, 200, 2);
  wc = one_completion(*b.server);
  BOOST_TEST(wc.wr_id == 101u);
  BOOST_TEST(wc.byte_len == 200u);
  BOOST_TEST(has_pattern(dst->data() + slot, 200, 2));
  send(*a.client, src, 3, 300, 3);
  wc = one_completion(*a.server);
  BOOST_TEST(wc.wr_id == 102u);
  BOOST_TEST(has_pattern(dst->data() + 2 * slot, 300, 3));
  // Nothing else completed on either side.
  std::vector<work_completion> rest;
  BOOST_TEST(drain_cq(*a.server, rest) == 0u);
  BOOST_TEST(drain_cq(*b.server, rest) == 0u);
}

// A connection whose messages may be larger than the shared receives
// takes receives of its own.
BOOST_AUTO_TEST_CASE(a_connection_with_larger_messages_keeps_its_own_receives) {
  open_shared(4);
  auto p = connect_pair(*dev, conn_params{2 * slot, 16});
  BOOST_TEST(!p.server->srq());
  auto own = make_buffer(*dev, 2 * slot, local_write);
  post_recv(*p.server, 9, own);
  auto src = make_buffer(*dev, 2 * slot, 0);
  send(*p.client, src, 5, 2 * slot, 1);
  auto wc = one_completion(*p.server);
  BOOST_TEST(wc.wr_id == 9u);
  BOOST_TEST(wc.byte_len == 2 * slot);
  BOOST_TEST(has_pattern(own.data(), 2 * slot, 5));
}

// A queue pair with a shared receive queue has no receive queue of its own.
BOOST_AUTO_TEST_CASE(
    a_queue_pair_with_a_shared_queue_refuses_its_own_receives) {
  open_shared(4);
  auto p = connect_pair(*dev, conn_params{slot, 16});
  auto sg = dst->sge_of(0, slot);
  auto err = p.server->post_recv(7, &sg, 1);
  BOOST_REQUIRE(err);
  BOOST_TEST(err.code() == static_cast<uint8_t>(errc::unsupported));
  BOOST_TEST(!p.server->in_error());
}

// With the queue empty a SEND waits for a receive (receiver not ready) and
// lands as soon as one is posted to the shared queue.
BOOST_AUTO_TEST_CASE(an_empty_shared_queue_holds_a_send_until_a_receive_comes) {
  open_shared(4, 5000);
  auto p = connect_pair(*dev, conn_params{slot, 16});
  auto src = make_buffer(*dev, slot, 0);
  fill_pattern(src.data(), 64, 9);
  auto sg = src.sge_of(0, 64);
  BOOST_REQUIRE(!p.client->post_send(1, &sg, 1));
  std::this_thread::sleep_for(100ms);
  std::vector<work_completion> none;
  BOOST_TEST(drain_cq(*p.server, none) == 0u);
  post_shared(300, 2);
  auto wc = one_completion(*p.server);
  BOOST_TEST(wc.status == wc_status::success);
  BOOST_TEST(wc.wr_id == 300u);
  BOOST_TEST(has_pattern(dst->data() + 2 * slot, 64, 9));
  BOOST_TEST(one_completion(*p.client).status == wc_status::success);
}

// Connections that wait their turn on a shared queue which keeps being
// posted to wait past the RNR timer: on soft it counts from the last
// receive posted to the queue, so a burst of many peers on a busy but
// working node ends no connection.  (On verbs the sender's RNR retries
// bound each wait, whatever the queue does.)
BOOST_AUTO_TEST_CASE(waiters_on_a_moving_shared_queue_outlast_the_rnr_timer) {
  if (fabric_options().fabric != "soft") {
    BOOST_TEST_MESSAGE("soft only: verbs bounds the wait by RNR retries");
    return;
  }
  open_shared(8, 300);
  conn_params offer{slot, 16};
  constexpr size_t n = 6;
  std::vector<qp_pair> pairs;
  for (size_t i = 0; i < n; ++i)
    pairs.push_back(connect_pair(*dev, offer));
  auto src = make_buffer(*dev, slot, 0);
  fill_pattern(src.data(), 64, 11);
  auto sg = src.sge_of(0, 64);
  for (size_t i = 0; i < n; ++i)
    BOOST_REQUIRE(!pairs[i].client->post_send(i, &sg, 1));
  // One receive every 100 ms: the last in line waits 600 ms, twice the
  // RNR timeout.
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < n; ++i) {
    std::this_thread::sleep_for(100ms);
    post_shared(700 + i, i);
  }
  std::vector<work_completion> wcs;
  for (auto& p : pairs) {
    auto wc = one_completion(*p.server);
    BOOST_TEST(wc.status == wc_status::success);
    BOOST_TEST(wc.byte_len == 64u);
    wcs.push_back(wc);
    BOOST_TEST(one_completion(*p.client).status == wc_status::success);
  }
  BOOST_TEST(ms_since(start) >= 600);
  for (size_t i = 0; i < n; ++i)
    BOOST_TEST(has_pattern(dst->data() + (wcs[i].wr_id - 700) * slot, 64, 11));
}

// A shared queue that nobody posts to fails a waiting SEND at the RNR
// timer, as a connection's own empty receive queue does.
BOOST_AUTO_TEST_CASE(a_shared_queue_nobody_posts_to_fails_the_send_in_time) {
  open_shared(4, 200);
  auto p = connect_pair(*dev, conn_params{slot, 16});
  auto src = make_buffer(*dev, slot, 0);
  auto sg = src.sge_of(0, 64);
  auto start = std::chrono::steady_clock::now();
  BOOST_REQUIRE(!p.client->post_send(1, &sg, 1));
  // The SEND's completion, and the client's own srq_error_wr_id (it takes
  // its receives from the same queue).
  auto wcs = wait_completions(*p.client, 2, 10s);
  auto elapsed = ms_since(start);
  auto send = std::find_if(wcs.begin(), wcs.end(),
                           [](const auto& wc) { return wc.wr_id == 1u; });
  BOOST_REQUIRE(send != wcs.end());
  BOOST_TEST(send->status == wc_status::rnr_retry_exceeded);
  BOOST_TEST(elapsed >= 100);
  BOOST_TEST(elapsed < 5000);
  BOOST_TEST(wait_error(*p.client));
}

// A connection that ends leaves the receives it did not fill to the others.
BOOST_AUTO_TEST_CASE(a_closed_connection_leaves_its_receives_to_the_others) {
  open_shared(4);
  conn_params offer{slot, 16};
  auto a = connect_pair(*dev, offer);
  auto b = connect_pair(*dev, offer);
  post_shared(400, 0);
  a.server->close();
  a.client->close();
  auto src = make_buffer(*dev, slot, 0);
  send(*b.client, src, 4, 48, 1);
  auto wc = one_completion(*b.server);
  BOOST_TEST(wc.status == wc_status::success);
  BOOST_TEST(wc.wr_id == 400u);
  BOOST_TEST(has_pattern(dst->data(), 48, 4));
}

// A queue pair without receives of its own says it entered the error state
// with one completion of the reserved srq_error_wr_id (a peer that goes
// away is noticed without traffic of ours).
BOOST_AUTO_TEST_CASE(the_error_state_completes_the_reserved_wr_id) {
  open_shared(4);
  auto p = connect_pair(*dev, conn_params{slot, 16});
  post_shared(500, 0);
  p.client->close();
  auto wcs = wait_completions(*p.server, 1);
  BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
  BOOST_TEST(wcs[0].wr_id == transport::srq_error_wr_id);
  BOOST_TEST(wcs[0].status == wc_status::work_request_flushed);
  BOOST_TEST(p.server->in_error());
  // Once: nothing else follows.
  std::this_thread::sleep_for(50ms);
  std::vector<work_completion> rest;
  BOOST_TEST(drain_cq(*p.server, rest) == 0u);
}

// A queue holds at least the receives asked for (a device may round up)
// and refuses one more than it holds; its size is checked on creation.
BOOST_AUTO_TEST_CASE(a_full_shared_queue_refuses_more_receives) {
  open_shared(4);
  for (auto bad : {uint32_t{0}, UINT32_MAX}) {
    auto none = dev->create_srq(bad);
    BOOST_REQUIRE(!none);
    BOOST_TEST(none.error().code()
               == static_cast<uint8_t>(errc::invalid_argument));
  }
  BOOST_TEST_MESSAGE("create_srq(4) holds " << srq->max_wr() << " receives");
  BOOST_REQUIRE(srq->max_wr() >= 4u);
  BOOST_REQUIRE(srq->max_wr() <= 4096u);
  // Never filled: one slot serves every receive.
  for (uint32_t i = 0; i < srq->max_wr(); ++i)
    post_shared(500 + i, 0);
  auto sg = dst->sge_of(0, slot);
  auto err = srq->post_recv(1, &sg, 1);
  BOOST_REQUIRE(err);
  BOOST_TEST(err.code() == static_cast<uint8_t>(errc::quota_exceeded),
             render(err));
  sge many[transport::max_sge + 1] = {};
  err = srq->post_recv(2, many, transport::max_sge + 1);
  BOOST_REQUIRE(err);
  BOOST_TEST(err.code() == static_cast<uint8_t>(errc::invalid_argument));
}

// The low watermark calls its function once when fewer receives than the
// limit are left posted (where the fabric has one: soft).
BOOST_AUTO_TEST_CASE(the_low_watermark_fires_once_below_its_limit) {
  open_shared(8);
  for (uint64_t i = 0; i < 3; ++i)
    post_shared(600 + i, i);
  std::atomic<int> fired{0};
  if (!srq->set_low_watermark(2, [&] { ++fired; })) {
    BOOST_TEST_MESSAGE("this fabric has no low watermark");
    return;
  }
  BOOST_TEST(fired == 0);
  auto p = connect_pair(*dev, conn_params{slot, 16});
  auto src = make_buffer(*dev, slot, 0);
  send(*p.client, src, 1, 8, 1);
  BOOST_TEST(one_completion(*p.server).wr_id == 600u);
  BOOST_TEST(fired == 0); // two left
  send(*p.client, src, 2, 8, 2);
  BOOST_TEST(one_completion(*p.server).wr_id == 601u);
  BOOST_TEST(fired == 1); // one left: below 2
  send(*p.client, src, 3, 8, 3);
  BOOST_TEST(one_completion(*p.server).wr_id == 602u);
  BOOST_TEST(fired == 1); // once until armed again
  BOOST_TEST(srq->set_low_watermark(2, [&] { ++fired; }));
  BOOST_TEST(fired == 2); // armed below its limit: at once
  BOOST_TEST(srq->set_low_watermark(0, {}));
}

BOOST_AUTO_TEST_SUITE_END()
