// Soft-fabric-only tests: a polling owner reads its socket itself.

#include <boost/test/unit_test.hpp>

#include "test/transport/soft_fabric_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

// -- a polling owner reads its socket itself
// -----------------------------------

BOOST_AUTO_TEST_SUITE(polled_owner)

/// Calls `progress` on `qp` and collects its completions until `n` arrived
/// or `timeout` passed; `also` is progressed as well (the peer's owner).
std::vector<work_completion>
progress_until(transport::queue_pair& qp, size_t n,
               transport::queue_pair* also = nullptr,
               std::chrono::milliseconds timeout = 10s) {
  std::vector<work_completion> out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    qp.progress();
    if (also != nullptr)
      also->progress();
    drain_cq(qp, out);
  }
  return out;
}

/// A connected pair whose server polls (`set_polled(true)`), with a
/// registered source on the client and a destination on the server of
/// `size` bytes each.
struct polled_pair {
  transport::device_ptr dev;
  qp_pair p;
  reg_buffer src;
  reg_buffer dst;

  explicit polled_pair(size_t size)
      : dev(open_soft(soft_options())), p(connect_pair(*dev)),
        src(make_buffer(*dev, size, 0)),
        dst(make_buffer(*dev, size, local_write)) {
    p.server->set_polled(true);
  }

  /// Posts a receive (wr_id `id`) on the server and a SEND of the source
  /// filled with pattern `seed` (wr_id `id + 1`) on the client.
  void send(uint64_t id, uint32_t seed) {
    fill_pattern(src.data(), src.bytes.size(), seed);
    auto rsg = dst.whole();
    BOOST_REQUIRE(!p.server->post_recv(id, &rsg, 1));
    auto ssg = src.whole();
    BOOST_REQUIRE(!p.client->post_send(id + 1, &ssg, 1));
  }
};

BOOST_AUTO_TEST_CASE(a_polled_owner_receives_on_its_own_thread) {
  polled_pair pp{1000};
  auto& p = pp.p;
  constexpr uint64_t rounds = 50;
  for (uint64_t i = 0; i < rounds; ++i) {
    pp.send(10 * i + 1, static_cast<uint32_t>(i));
    auto got = progress_until(*p.server, 1);
    BOOST_REQUIRE_EQUAL(got.size(), 1u);
    BOOST_TEST(got[0].wr_id == 10 * i + 1);
    BOOST_TEST(got[0].status == wc_status::success);
    BOOST_TEST(got[0].byte_len == 1000u);
    BOOST_TEST(has_pattern(pp.dst.data(), 1000, static_cast<uint32_t>(i)));
    // The ACK the sender waits for goes out from the owner's timers (it
    // sends nothing the ACK could ride on).
    auto sent = progress_until(*p.client, 1, p.server.get());
    BOOST_REQUIRE_EQUAL(sent.size(), 1u);
    BOOST_TEST(sent[0].wr_id == 10 * i + 2);
    BOOST_TEST(sent[0].status == wc_status::success);
  }
  // The owner read them, not the event loop (which only helps an owner
  // that made no progress for owner_stall_ms: a descheduled test thread
  // may cause that now and then, so most, not all).
  BOOST_TEST(soft::frames_read_by_owner(*p.server) > rounds / 2);
}

BOOST_AUTO_TEST_CASE(a_stalled_owner_is_covered_by_the_loop) {
  // An owner that polls but makes no progress (its worker is held
  // elsewhere): the loop reads and acknowledges after owner_stall_ms, as
  // a NIC would.
  polled_pair pp{64};
  auto& p = pp.p;
  pp.send(1, 9);
  auto got = poll_completions(*p.server, 1, 5s);
  BOOST_REQUIRE_EQUAL(got.size(), 1u);
  BOOST_TEST(got[0].status == wc_status::success);
  BOOST_TEST(has_pattern(pp.dst.data(), 64, 9));
  auto sent = wait_completions(*p.client, 1, 5s);
  BOOST_REQUIRE_EQUAL(sent.size(), 1u);
  BOOST_TEST(sent[0].status == wc_status::success);
  BOOST_TEST(soft::frames_read_by_owner(*p.server) == 0u);
}

BOOST_AUTO_TEST_CASE(an_owner_that_stops_polling_hands_the_socket_back) {
  polled_pair pp{64};
  auto& p = pp.p;
  pp.send(1, 5);
  BOOST_REQUIRE_EQUAL(progress_until(*p.server, 1).size(), 1u);
  BOOST_REQUIRE_EQUAL(progress_until(*p.client, 1, p.server.get()).size(), 1u);
  auto by_owner = soft::frames_read_by_owner(*p.server);
  // Switched off (after arming, as the transport actor does): the loop
  // reads again and notifies the armed CQ.
  BOOST_REQUIRE(!p.server->arm_cq());
  p.server->set_polled(false);
  pp.send(3, 6);
  auto got = wait_completions(*p.server, 1, 5s);
  BOOST_REQUIRE_EQUAL(got.size(), 1u);
  BOOST_TEST(got[0].wr_id == 3u);
  BOOST_TEST(has_pattern(pp.dst.data(), 64, 6));
  BOOST_TEST(wait_completions(*p.client, 1, 5s).size() == 1u);
  BOOST_TEST(soft::frames_read_by_owner(*p.server) == by_owner);
  // progress does nothing while not polled.
  p.server->progress();
  BOOST_TEST(soft::frames_read_by_owner(*p.server) == by_owner);
}

BOOST_AUTO_TEST_CASE(a_polled_owner_still_sees_the_peer_go) {
  auto dev = open_soft(soft_options());
  auto p = connect_pair(*dev);
  p.server->set_polled(true);
  p.client.reset();
  BOOST_TEST(wait_error(*p.server));
}

BOOST_AUTO_TEST_CASE(a_polled_owner_serves_reads_and_answers_many_sends) {
  // Inbound READs are answered and a stream of SENDs completes in order
  // with the owner doing the reading.
  auto dev = open_soft(soft_options());
  auto p = connect_pair(*dev);
  p.server->set_polled(true);
  auto remote = make_buffer(*dev, 4096, remote_read);
  fill_pattern(remote.data(), 4096, 3);
  auto local = make_buffer(*dev, 4096, local_write);
  auto lsg = local.whole();
  BOOST_REQUIRE(
      !p.client->post_read(1, &lsg, 1, remote.addr(), remote.mr->rkey()));
  auto read = progress_until(*p.client, 1, p.server.get());
  BOOST_REQUIRE_EQUAL(read.size(), 1u);
  BOOST_TEST(read[0].status == wc_status::success);
  BOOST_TEST(has_pattern(local.data(), 4096, 3));
  constexpr uint64_t n = 200;
  auto dst = make_buffer(*dev, 64 * n, local_write);
  auto src = make_buffer(*dev, 64, 0);
  for (uint64_t i = 0; i < n; ++i) {
    auto r = dst.sge_of(64 * i, 64);
    BOOST_REQUIRE(!p.server->post_recv(100 + i, &r, 1));
  }
  auto ssg = src.whole();
  for (uint64_t i = 0; i < n; ++i)
    BOOST_REQUIRE(
        !p.client->post_send(1000 + i, &ssg, 1, std::nullopt, i + 1 == n));
  auto got = progress_until(*p.server, n);
  BOOST_REQUIRE_EQUAL(got.size(), n);
  for (uint64_t i = 0; i < n; ++i)
    BOOST_TEST(got[i].wr_id == 100 + i);
  auto sent = progress_until(*p.client, 1, p.server.get());
  BOOST_REQUIRE_EQUAL(sent.size(), 1u);
  BOOST_TEST(sent[0].wr_id == 1000 + n - 1);
  BOOST_TEST(sent[0].status == wc_status::success);
  BOOST_TEST(soft::frames_read_by_owner(*p.server) > 0u);
}

BOOST_AUTO_TEST_SUITE_END()
