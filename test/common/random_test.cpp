#include <boost/test/unit_test.hpp>

// common/random.hpp: a per-thread generator for ids.

#include <set>
#include <thread>

#include "common/random.hpp"

using rdmactor::random_u64;

BOOST_AUTO_TEST_SUITE(random_suite)

BOOST_AUTO_TEST_CASE(values_differ_within_and_across_threads) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i)
    seen.insert(random_u64());
  BOOST_TEST(seen.size() == 1000u);
  // Another thread's generator is seeded on its own: its values are not
  // this thread's sequence again.
  uint64_t other_first = 0;
  std::thread t{[&] { other_first = random_u64(); }};
  t.join();
  BOOST_TEST(seen.count(other_first) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
