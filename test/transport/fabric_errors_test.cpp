// Fabric-generic: errors and the end of a connection.  Remote access
// errors leave memory untouched, a receive too small is a local length
// error, a send without a posted receive waits out the RNR timeout, and
// closing (ours, the peer's, or the peer's destruction) flushes what was
// posted.  Part of fabric_test (soft and verbs, like fabric_test.cpp).

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstring>
#include <thread>

#include "test/transport/fabric_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_FIXTURE_TEST_SUITE(fabric_errors, fabric_fixture)

BOOST_AUTO_TEST_CASE(remote_access_errors_leave_memory_untouched) {
  auto& d = open();
  auto src = make_buffer(d, 8192, local_write);
  fill_pattern(src.data(), 8192, 3);
  auto rw
      = make_buffer(d, 4096, local_write | remote_write | remote_read, 0x11);
  auto local_only = make_buffer(d, 4096, local_write, 0x22);
  auto write_only = make_buffer(d, 4096, local_write | remote_write, 0x33);
  struct op_case {
    const char* name;
    bool read;
    uint64_t addr;
    uint32_t rkey;
    uint32_t len;
  };
  op_case cases[] = {
      {"bad rkey", false, rw.addr(), rw.mr->rkey() ^ 0x5A5A5A5Au, 100},
      {"out of bounds", false, rw.addr(4000), rw.mr->rkey(), 200},
      {"before the region", false, rw.addr() - 8, rw.mr->rkey(), 100},
      {"write without remote_write", false, local_only.addr(),
       local_only.mr->rkey(), 100},
      {"read without remote_read", true, write_only.addr(),
       write_only.mr->rkey(), 100},
      {"read out of bounds", true, rw.addr(1), rw.mr->rkey(), 4096},
  };
  for (auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      auto p = connect_pair(d);
      // A receive posted on the target flushes when its QP errors.
      auto inbox = make_buffer(d, 64, local_write);
      post_recv(*p.server, 7, inbox);
      std::fill(src.bytes.begin(), src.bytes.end(), 0x99);
      auto sg = src.sge_of(0, c.len);
      if (c.read)
        BOOST_REQUIRE(!p.client->post_read(1, &sg, 1, c.addr, c.rkey));
      else
        BOOST_REQUIRE(!p.client->post_write(1, &sg, 1, c.addr, c.rkey));
      auto wc = one_completion(*p.client);
      BOOST_TEST(wc.wr_id == 1u);
      BOOST_TEST(wc.status == wc_status::remote_access_error);
      BOOST_TEST(all_bytes(rw.data(), 4096, 0x11));
      BOOST_TEST(all_bytes(local_only.data(), 4096, 0x22));
      BOOST_TEST(all_bytes(write_only.data(), 4096, 0x33));
      if (c.read)
        BOOST_TEST(all_bytes(src.data(), c.len, 0x99));
      // The initiator's QP is in the error state: later posts fail.
      BOOST_TEST(wait_error(*p.client));
      auto err = p.client->post_write(2, &sg, 1, rw.addr(), rw.mr->rkey());
      BOOST_TEST(code_of(err) == errc::qp_error);
      // The target's QP follows and flushes its receive.
      auto rwc = one_completion(*p.server);
      BOOST_TEST(rwc.wr_id == 7u);
      BOOST_TEST(rwc.status == wc_status::work_request_flushed);
      BOOST_TEST(wait_error(*p.server));
    }
  }
}

BOOST_AUTO_TEST_CASE(local_length_error_on_small_receive) {
  auto& d = open();
  auto p = connect_pair(d);
  auto src = make_buffer(d, 200, 0);
  auto small = make_buffer(d, 100, local_write, 0x44);
  auto other = make_buffer(d, 100, local_write);
  post_recv(*p.server, 1, small);
  post_recv(*p.server, 2, other);
  auto sg = src.whole();
  BOOST_REQUIRE(!p.client->post_send(9, &sg, 1));
  auto rwcs = wait_completions(*p.server, 2);
  BOOST_REQUIRE_EQUAL(rwcs.size(), 2u);
  BOOST_TEST(rwcs[0].wr_id == 1u);
  BOOST_TEST(rwcs[0].status == wc_status::local_length_error);
  BOOST_TEST(rwcs[1].wr_id == 2u);
  BOOST_TEST(rwcs[1].status == wc_status::work_request_flushed);
  auto swc = one_completion(*p.client);
  BOOST_TEST(swc.wr_id == 9u);
  BOOST_TEST(swc.status != wc_status::success);
  BOOST_TEST(wait_error(*p.client));
  BOOST_TEST(wait_error(*p.server));
}

BOOST_AUTO_TEST_CASE(receiver_not_ready) {
  auto& d = open(200);
  auto p = connect_pair(d);
  auto src = make_buffer(d, 64, 0);
  auto sg = src.whole();
  auto start = std::chrono::steady_clock::now();
  BOOST_REQUIRE(!p.client->post_send(1, &sg, 1));
  auto wc = one_completion(*p.client, 10s);
  auto elapsed = ms_since(start);
  BOOST_TEST(wc.status == wc_status::rnr_retry_exceeded);
  BOOST_TEST(elapsed >= 100);
  BOOST_TEST(elapsed < 5000);
  BOOST_TEST(wait_error(*p.client));
  BOOST_TEST(code_of(p.client->post_send(2, &sg, 1)) == errc::qp_error);
}

BOOST_AUTO_TEST_CASE(receive_posted_within_rnr_timeout_is_used) {
  auto& d = open(3000);
  auto p = connect_pair(d);
  auto src = make_buffer(d, 1000, 0);
  fill_pattern(src.data(), 1000, 8);
  auto dst = make_buffer(d, 3000, local_write);
  for (uint64_t i = 0; i < 3; ++i) {
    auto sg = src.sge_of(i * 100, 500);
    BOOST_REQUIRE(!p.client->post_send(i, &sg, 1));
  }
  // Let the SENDs reach the server before its receives: this suite knows
  // only fabric.hpp, which shows no receiver-not-ready state, so a busy
  // machine may post the receives first and test less (never fail: the RNR
  // timeout is 3 s).  soft_fabric_test waits for that state instead
  // (soft::waiting_for_receive).
  std::this_thread::sleep_for(200ms);
  for (uint64_t i = 0; i < 3; ++i)
    post_recv(*p.server, 10 + i, dst, i * 1000, 1000);
  auto rwcs = wait_completions(*p.server, 3);
  BOOST_REQUIRE_EQUAL(rwcs.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    BOOST_TEST(rwcs[i].wr_id == 10 + i);
    BOOST_TEST(rwcs[i].status == wc_status::success);
    BOOST_TEST(std::memcmp(dst.data() + i * 1000, src.data() + i * 100, 500)
               == 0);
  }
  BOOST_TEST(wait_completions(*p.client, 3).size() == 3u);
}

BOOST_AUTO_TEST_CASE(close_flushes_outstanding_work) {
  auto& d = open(10000);
  auto p = connect_pair(d);
  auto src = make_buffer(d, 4096, 0);
  auto dst = make_buffer(d, 4096, local_write);
  // Receives on both sides; sends from the client that the server cannot
  // take (no receive posted there), so they stay outstanding.
  for (uint64_t i = 0; i < 3; ++i)
    post_recv(*p.client, 100 + i, dst, i * 1000, 1000);
  auto sg = src.sge_of(0, 100);
  for (uint64_t i = 0; i < 4; ++i)
    BOOST_REQUIRE(!p.client->post_send(i, &sg, 1));
  // Nothing completes (a negative check: load can only make it see less).
  std::this_thread::sleep_for(50ms);
  BOOST_TEST(wait_completions(*p.client, 1, 50ms).empty());
  p.client->close();
  p.client->close(); // idempotent
  BOOST_TEST(p.client->in_error());
  auto wcs = wait_completions(*p.client, 7, 5s);
  BOOST_REQUIRE_EQUAL(wcs.size(), 7u);
  BOOST_TEST(count_status(wcs, wc_status::work_request_flushed) == 7u);
  BOOST_TEST(code_of(p.client->post_send(9, &sg, 1)) == errc::qp_error);
  BOOST_TEST(code_of(p.client->post_recv(9, &sg, 1)) == errc::qp_error);
  auto rsg = dst.whole();
  BOOST_TEST(code_of(p.client->post_read(9, &rsg, 1, 0, 0)) == errc::qp_error);
  BOOST_TEST(code_of(p.client->post_write(9, &sg, 1, 0, 0)) == errc::qp_error);
  // The peer notices the disconnect.
  BOOST_TEST(wait_error(*p.server));
}

BOOST_AUTO_TEST_CASE(peer_close_flushes_posted_receives) {
  auto& d = open();
  auto p = connect_pair(d);
  auto dst = make_buffer(d, 4096, local_write);
  for (uint64_t i = 0; i < 4; ++i)
    post_recv(*p.server, i, dst, i * 1000, 1000);
  p.client->close();
  auto wcs = wait_completions(*p.server, 4, 10s);
  BOOST_REQUIRE_EQUAL(wcs.size(), 4u);
  BOOST_TEST(count_status(wcs, wc_status::work_request_flushed) == 4u);
  BOOST_TEST(wait_error(*p.server));
}

BOOST_AUTO_TEST_CASE(peer_destroyed_flushes_posted_receives) {
  auto& d = open();
  auto p = connect_pair(d);
  auto dst = make_buffer(d, 4096, local_write);
  for (uint64_t i = 0; i < 2; ++i)
    post_recv(*p.server, i, dst, i * 1000, 1000);
  p.client.reset();
  auto wcs = wait_completions(*p.server, 2, 10s);
  BOOST_REQUIRE_EQUAL(wcs.size(), 2u);
  BOOST_TEST(count_status(wcs, wc_status::work_request_flushed) == 2u);
  // The soft fabric says why (verbs: the device does not).
  if (opts.fabric == "soft")
    BOOST_TEST(!p.server->failure_reason().empty());
}

BOOST_AUTO_TEST_SUITE_END()
