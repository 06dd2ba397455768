// Fabric-generic: work posted while the doorbell is held
// (queue_pair::hold_doorbell) completes like work posted one by one, in
// order, once it rings; on verbs the burst goes as one chain of work
// requests, on soft as one sendmsg.

#include <boost/test/unit_test.hpp>

#include <cstring>

#include "common/logging.hpp"
#include "test/transport/fabric_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace doorbell_tests {

constexpr size_t burst = 24;
constexpr size_t msg_bytes = 512;

/// A pair on the fabric under test for a burst of `burst` messages.
struct held_pair : burst_pair {
  explicit held_pair(bool held_receives = false)
      : burst_pair(value_or_throw(transport::open_device(fabric_options()),
                                  "open_device"),
                   burst, msg_bytes, held_receives) {
    set_log_level(fabric_options().log_level);
  }
};

/// The server's receives took the burst, in order, byte for byte.
void expect_burst_received(held_pair& h) {
  auto got = wait_completions(*h.p.server, burst);
  BOOST_REQUIRE_EQUAL(got.size(), burst);
  for (size_t i = 0; i < burst; ++i) {
    BOOST_TEST(got[i].wr_id == 100 + i);
    BOOST_TEST(got[i].status == transport::wc_status::success);
  }
  BOOST_TEST(std::memcmp(h.dst.data(), h.src.data(), burst * msg_bytes) == 0);
}

} // namespace doorbell_tests

BOOST_AUTO_TEST_SUITE(doorbell)

using doorbell_tests::burst;
using doorbell_tests::msg_bytes;

BOOST_AUTO_TEST_CASE(a_held_burst_of_sends_and_writes_completes_in_order) {
  doorbell_tests::held_pair h;
  auto& client = *h.p.client;
  client.hold_doorbell();
  for (size_t i = 0; i < burst; ++i) {
    auto sg = h.message(i);
    // Every other send unsignaled: the signaled ones after it finish it.
    BOOST_REQUIRE(!client.post_send(1 + i, &sg, 1, std::nullopt, i % 2 == 1));
    BOOST_REQUIRE(
        !client.post_write(1000 + i, &sg, 1, h.target.addr(i * msg_bytes),
                           h.target.mr->rkey(), std::nullopt, i + 1 == burst));
  }
  BOOST_REQUIRE(!client.ring_doorbell());
  doorbell_tests::expect_burst_received(h);
  // Signaled: the odd sends and the last write, in posting order.
  auto sent = wait_completions(client, burst / 2 + 1);
  BOOST_REQUIRE_EQUAL(sent.size(), burst / 2 + 1);
  for (size_t k = 0; k + 1 < sent.size(); ++k)
    BOOST_TEST(sent[k].wr_id == 2 + 2 * k);
  BOOST_TEST(sent.back().wr_id == 1000 + burst - 1);
  for (auto& wc : sent)
    BOOST_TEST(wc.status == transport::wc_status::success);
  // The last write completed, so every write before it landed.
  BOOST_TEST(std::memcmp(h.target.data(), h.src.data(), burst * msg_bytes)
             == 0);
}

BOOST_AUTO_TEST_CASE(receives_posted_behind_a_held_doorbell_take_sends) {
  doorbell_tests::held_pair h{true};
  for (size_t i = 0; i < burst; ++i) {
    auto sg = h.message(i);
    BOOST_REQUIRE(!h.p.client->post_send(1 + i, &sg, 1));
  }
  doorbell_tests::expect_burst_received(h);
}

BOOST_AUTO_TEST_CASE(ringing_without_a_hold_or_twice_is_harmless) {
  doorbell_tests::held_pair h;
  auto& client = *h.p.client;
  BOOST_TEST(!client.ring_doorbell());
  client.hold_doorbell();
  BOOST_TEST(!client.ring_doorbell());
  BOOST_TEST(!client.ring_doorbell());
  // Posts go at once again.
  auto sg = h.message(0);
  BOOST_REQUIRE(!client.post_send(1, &sg, 1));
  auto got = wait_completions(*h.p.server, 1);
  BOOST_REQUIRE_EQUAL(got.size(), 1u);
  BOOST_TEST(got[0].status == transport::wc_status::success);
}

BOOST_AUTO_TEST_SUITE_END()
