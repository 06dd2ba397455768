// Soft-fabric-only tests: fault injection.

#include <boost/test/unit_test.hpp>

#include "test/transport/soft_fabric_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

// -- fault injection -------------------------------------------------------

BOOST_AUTO_TEST_SUITE(faults)

BOOST_AUTO_TEST_CASE(drop_after_n_bytes) {
  auto dev = open_soft(soft_options());
  constexpr size_t msg = 2000;
  constexpr size_t frame = wire::header_size + msg;
  for (uint64_t limit :
       {uint64_t{0}, uint64_t{1}, uint64_t{31}, uint64_t{32}, uint64_t{33},
        uint64_t{frame}, uint64_t{frame + 1}, uint64_t{2 * frame},
        uint64_t{2 * frame + 100}, uint64_t{5 * frame - 1}}) {
    BOOST_TEST_CONTEXT("drop after " << limit << " bytes") {
      auto p = connect_pair(*dev);
      soft::fault_plan plan;
      plan.drop_after_bytes = limit;
      BOOST_REQUIRE(!soft::set_faults(*p.client, plan));
      auto src = make_buffer(*dev, 5 * msg, 0);
      auto dst = make_buffer(*dev, 5 * msg, local_write, 0);
      for (uint64_t i = 0; i < 5; ++i) {
        fill_pattern(src.data() + i * msg, msg, static_cast<uint32_t>(i));
        auto rsg = dst.sge_of(i * msg, msg);
        BOOST_REQUIRE(!p.server->post_recv(i, &rsg, 1));
      }
      for (uint64_t i = 0; i < 5; ++i) {
        auto sg = src.sge_of(i * msg, msg);
        auto err = p.client->post_send(10 + i, &sg, 1);
        BOOST_TEST((!err || code_of(err) == errc::qp_error));
      }
      auto expected_ok = std::min<uint64_t>(limit / frame, 5);
      auto rwcs = wait_completions(*p.server, 5, 5s);
      BOOST_REQUIRE_EQUAL(rwcs.size(), 5u);
      BOOST_TEST(count_status(rwcs, wc_status::success) == expected_ok);
      for (uint64_t i = 0; i < expected_ok; ++i) {
        BOOST_TEST(rwcs[i].wr_id == i);
        BOOST_TEST(
            has_pattern(dst.data() + i * msg, msg, static_cast<uint32_t>(i)));
      }
      BOOST_TEST(wait_error(*p.server));
      BOOST_TEST(wait_error(*p.client));
      std::vector<work_completion> swcs;
      drain_cq(*p.client, swcs);
      BOOST_TEST(count_status(swcs, wc_status::success) <= expected_ok);
      for (auto& wc : swcs)
        BOOST_TEST((wc.status == wc_status::success
                    || wc.status == wc_status::work_request_flushed));
    }
  }
}

BOOST_AUTO_TEST_CASE(corrupt_frame) {
  auto dev = open_soft(soft_options());
  auto p = connect_pair(*dev);
  soft::fault_plan plan;
  plan.corrupt_frame = 3;
  BOOST_REQUIRE(!soft::set_faults(*p.client, plan));
  auto src = make_buffer(*dev, 100, 0);
  auto dst = make_buffer(*dev, 500, local_write);
  for (uint64_t i = 0; i < 5; ++i) {
    auto rsg = dst.sge_of(i * 100, 100);
    BOOST_REQUIRE(!p.server->post_recv(i, &rsg, 1));
  }
  auto sg = src.whole();
  // The corrupt third frame may put the QP in the error state before the
  // last posts (under load): those fail at once and complete nothing.
  size_t posted = 0;
  for (uint64_t i = 0; i < 5; ++i)
    if (!p.client->post_send(10 + i, &sg, 1))
      ++posted;
  BOOST_REQUIRE_GE(posted, 3u);
  auto rwcs = wait_completions(*p.server, 5, 5s);
  BOOST_REQUIRE_EQUAL(rwcs.size(), 5u);
  BOOST_TEST(count_status(rwcs, wc_status::success) == 2u);
  auto swcs = wait_completions(*p.client, posted, 5s);
  BOOST_TEST(swcs.size() == posted);
  BOOST_TEST(count_status(swcs, wc_status::success) <= 2u);
  BOOST_TEST(wait_error(*p.client));
  BOOST_TEST(wait_error(*p.server));
}

BOOST_AUTO_TEST_CASE(corrupt_acknowledgement) {
  auto dev = open_soft(soft_options());
  auto p = connect_pair(*dev);
  soft::fault_plan plan;
  plan.corrupt_frame = 1;
  BOOST_REQUIRE(!soft::set_faults(*p.server, plan));
  auto src = make_buffer(*dev, 100, 0);
  auto dst = make_buffer(*dev, 100, local_write);
  auto rsg = dst.whole();
  BOOST_REQUIRE(!p.server->post_recv(1, &rsg, 1));
  auto sg = src.whole();
  BOOST_REQUIRE(!p.client->post_send(2, &sg, 1));
  auto rwcs = wait_completions(*p.server, 1, 5s);
  BOOST_REQUIRE_EQUAL(rwcs.size(), 1u);
  BOOST_TEST(rwcs[0].status == wc_status::success);
  auto swcs = wait_completions(*p.client, 1, 5s);
  BOOST_REQUIRE_EQUAL(swcs.size(), 1u);
  BOOST_TEST(swcs[0].status == wc_status::work_request_flushed);
  BOOST_TEST(wait_error(*p.server));
}

BOOST_AUTO_TEST_CASE(delay_each_frame) {
  auto dev = open_soft(soft_options());
  auto p = connect_pair(*dev);
  soft::fault_plan plan;
  plan.delay = 500ms;
  BOOST_REQUIRE(!soft::set_faults(*p.client, plan));
  auto src = make_buffer(*dev, 4096, 0);
  fill_pattern(src.data(), 4096, 6);
  auto dst = make_buffer(*dev, 4096, local_write);
  auto rsg = dst.whole();
  BOOST_REQUIRE(!p.server->post_recv(1, &rsg, 1));
  auto sg = src.whole();
  auto start = std::chrono::steady_clock::now();
  BOOST_REQUIRE(!p.client->post_send(2, &sg, 1));
  auto swcs = wait_completions(*p.client, 1, 5s);
  BOOST_REQUIRE_EQUAL(swcs.size(), 1u);
  BOOST_TEST(swcs[0].status == wc_status::success);
  BOOST_TEST(ms_since(start) >= 490);
  BOOST_TEST(has_pattern(dst.data(), 4096, 6));
  // Order is kept under delay: three writes then a send.
  auto target = make_buffer(*dev, 3 * 4096, local_write | remote_write, 0);
  BOOST_TEST(wait_completions(*p.server, 1, 5s).size() == 1u);
  for (uint64_t i = 0; i < 3; ++i)
    BOOST_REQUIRE(!p.client->post_write(10 + i, &sg, 1, target.addr(i * 4096),
                                        target.mr->rkey(), std::nullopt,
                                        false));
  BOOST_REQUIRE(!p.server->post_recv(3, &rsg, 1));
  BOOST_REQUIRE(!p.client->post_send(4, &sg, 1));
  auto r = wait_completions(*p.server, 1, 5s);
  BOOST_REQUIRE_EQUAL(r.size(), 1u);
  for (uint64_t i = 0; i < 3; ++i)
    BOOST_TEST(has_pattern(target.data() + i * 4096, 4096, 6));
  BOOST_TEST(wait_completions(*p.client, 1, 5s).size() == 1u);
  // No more delay.
  BOOST_REQUIRE(!soft::set_faults(*p.client, soft::fault_plan{}));
  BOOST_REQUIRE(!p.server->post_recv(5, &rsg, 1));
  start = std::chrono::steady_clock::now();
  BOOST_REQUIRE(!p.client->post_send(6, &sg, 1));
  BOOST_TEST(wait_completions(*p.client, 1, 5s).size() == 1u);
  // Under the delay (500 ms), with room for a busy machine.
  BOOST_TEST(ms_since(start) < 490);
}

BOOST_AUTO_TEST_CASE(device_plan_applies_to_new_queue_pairs) {
  auto dev = open_soft(soft_options());
  soft::fault_plan plan;
  plan.delay = 100ms;
  BOOST_REQUIRE(!soft::set_faults(*dev, plan));
  auto p = connect_pair(*dev);
  BOOST_REQUIRE(!soft::set_faults(*dev, soft::fault_plan{}));
  auto src = make_buffer(*dev, 64, 0);
  auto dst = make_buffer(*dev, 64, local_write);
  auto rsg = dst.whole();
  BOOST_REQUIRE(!p.server->post_recv(1, &rsg, 1));
  auto sg = src.whole();
  auto start = std::chrono::steady_clock::now();
  BOOST_REQUIRE(!p.client->post_send(2, &sg, 1));
  BOOST_TEST(wait_completions(*p.client, 1, 5s).size() == 1u);
  // Request delayed on the client, acknowledgement on the server.
  BOOST_TEST(ms_since(start) >= 190);
}

BOOST_AUTO_TEST_SUITE_END()
