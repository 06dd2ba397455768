// Soft-fabric-only tests: work posted while the doorbell is held waits in
// the queue pair and leaves in one sendmsg when it rings.

#include <boost/test/unit_test.hpp>

#include "test/transport/soft_fabric_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(doorbell)

namespace {

constexpr size_t burst = 16;
constexpr size_t msg_bytes = 256;

/// A soft pair for a burst of `burst` messages.
struct soft_burst : burst_pair {
  soft_burst() : burst_pair(open_soft(soft_options()), burst, msg_bytes) {}

  /// Posts the burst of SENDs on the client (wr_ids 1..burst).
  void post_burst() {
    for (size_t i = 0; i < burst; ++i) {
      auto sg = message(i);
      BOOST_REQUIRE(!p.client->post_send(1 + i, &sg, 1));
    }
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(held_sends_wait_and_leave_in_one_write) {
  soft_burst b;
  auto writes = soft::socket_writes(*b.p.client);
  b.p.client->hold_doorbell();
  b.post_burst();
  // Held: nothing reached the socket, so the server receives nothing.
  BOOST_TEST(poll_completions(*b.p.server, 1, 50ms).empty());
  BOOST_TEST(soft::socket_writes(*b.p.client) == writes);
  b.p.client->ring_doorbell();
  auto got = wait_completions(*b.p.server, burst);
  BOOST_REQUIRE_EQUAL(got.size(), burst);
  for (size_t i = 0; i < burst; ++i) {
    BOOST_TEST(got[i].wr_id == 100 + i);
    BOOST_TEST(got[i].status == wc_status::success);
    BOOST_TEST(got[i].byte_len == msg_bytes);
  }
  BOOST_TEST(std::memcmp(b.dst.data(), b.src.data(), burst * msg_bytes) == 0);
  BOOST_TEST(soft::socket_writes(*b.p.client) == writes + 1);
  auto sent = wait_completions(*b.p.client, burst);
  BOOST_TEST(sent.size() == burst);
}

BOOST_AUTO_TEST_CASE(a_burst_read_in_one_go_asks_the_socket_once) {
  soft_burst b;
  auto empty = soft::empty_socket_reads(*b.p.server);
  b.p.client->hold_doorbell();
  b.post_burst();
  b.p.client->ring_doorbell(); // one write of 16 frames, one read
  auto got = wait_completions(*b.p.server, burst);
  BOOST_REQUIRE_EQUAL(got.size(), burst);
  // The read got less than the receive buffer holds: the socket was empty
  // then, so the reader did not ask it again (that read would only have
  // failed with EAGAIN).
  BOOST_TEST(soft::empty_socket_reads(*b.p.server) == empty);
}

BOOST_AUTO_TEST_CASE(without_a_hold_each_post_writes_at_once) {
  soft_burst b;
  auto writes = soft::socket_writes(*b.p.client);
  b.post_burst();
  auto got = wait_completions(*b.p.server, burst);
  BOOST_REQUIRE_EQUAL(got.size(), burst);
  // One write per post (the socket never fills with 4 KiB).
  BOOST_TEST(soft::socket_writes(*b.p.client) == writes + burst);
}

BOOST_AUTO_TEST_CASE(held_work_fails_with_the_connection_not_silently) {
  soft_burst b;
  b.p.client->hold_doorbell();
  b.post_burst();
  b.p.server.reset(); // the peer goes while the burst is held
  auto got = wait_completions(*b.p.client, burst);
  BOOST_REQUIRE_EQUAL(got.size(), burst);
  for (auto& wc : got)
    BOOST_TEST(wc.status != wc_status::success);
  // Ringing a failed queue pair writes nothing and does not crash.
  b.p.client->ring_doorbell();
}

BOOST_AUTO_TEST_SUITE_END()
