#include <boost/test/unit_test.hpp>

// The suite `outbox`: the messages proxies hand to their agent
// (actors/remote/actor_outbox.hpp): order, one wake-up per batch, bytes
// and regions, capacity kept between batches and freed past its bound.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/remote/actor_outbox.hpp"

using namespace rdmactor;

BOOST_AUTO_TEST_SUITE(outbox)

namespace {

/// A region of `bytes` that counts its release in `released`.
local_mr region_of(std::vector<uint8_t>& bytes, int& released) {
  return local_mr{std::make_shared<mr_block>(bytes.data(), bytes.size(), 1, 2,
                                             [&released] { ++released; })};
}

} // namespace

BOOST_AUTO_TEST_CASE(a_batch_keeps_its_order_and_wakes_the_agent_once) {
  actor_outbox box;
  std::vector<uint8_t> large(100, 7);
  int released = 0;
  // Only the first message into an empty outbox asks for a wake-up.
  BOOST_TEST(box.push(1, 10, 100, false, "one", 3));
  BOOST_TEST(!box.push(2, 20, 200, false, "", 0));
  BOOST_TEST(
      !box.push(3, 30, 300, true, nullptr, 0, region_of(large, released)));
  BOOST_TEST(!box.push(4, 40, 400, false, "four", 4));
  BOOST_TEST(box.size() == 4u);
  BOOST_TEST(box.bytes() == 7u);
  actor_outbox batch;
  box.take(batch);
  BOOST_TEST(box.empty());
  BOOST_TEST(box.bytes() == 0u);
  auto& ms = batch.messages();
  BOOST_REQUIRE(ms.size() == 4u);
  BOOST_TEST(ms[0].target == 1u);
  BOOST_TEST(ms[0].sender == 10u);
  BOOST_TEST(ms[0].mid == 100u);
  BOOST_TEST(std::string(batch.data(ms[0]), ms[0].len) == "one");
  BOOST_TEST(ms[1].len == 0u);
  BOOST_TEST(ms[2].down);
  BOOST_TEST(ms[2].region.valid());
  BOOST_TEST(ms[2].len == large.size());
  BOOST_TEST(std::string(batch.data(ms[3]), ms[3].len) == "four");
  // Empty again: the next message wakes the agent again.
  BOOST_TEST(box.push(5, 50, 500, false, "five", 4));
  // The region returns to its owner when the batch is cleared (or its
  // message posted took it).
  BOOST_TEST(released == 0);
  batch.clear();
  BOOST_TEST(released == 1);
  BOOST_TEST(batch.empty());
}

BOOST_AUTO_TEST_CASE(swapping_keeps_capacity_and_frees_what_is_past_the_bound) {
  actor_outbox box;
  actor_outbox batch;
  std::string chunk(1000, 'x');
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 100; ++i)
      box.push(1, 2, 3, false, chunk.data(), chunk.size());
    box.take(batch);
    BOOST_TEST(batch.size() == 100u);
    BOOST_TEST(batch.bytes() == 100'000u);
    BOOST_TEST(std::string(batch.data(batch.messages()[99]), 4) == "xxxx");
    // From the second batch on, the outbox fills the buffer the agent's
    // batch gave back: no regrowth.
    if (round > 0)
      BOOST_TEST(box.capacity() >= 100'000u);
  }
  // A burst past keep_bytes: its buffer is freed by clear, not kept.
  std::string big(actor_outbox::keep_bytes + 1, 'y');
  box.push(1, 2, 3, false, big.data(), big.size());
  box.take(batch);
  BOOST_TEST(batch.bytes() == big.size());
  batch.clear();
  BOOST_TEST(batch.bytes() == 0u);
  BOOST_TEST(batch.capacity() <= actor_outbox::keep_bytes);
  box.take(batch); // nothing: both empty
  BOOST_TEST(batch.empty());
  BOOST_TEST(box.empty());
}

BOOST_AUTO_TEST_SUITE_END()
