#include <boost/test/unit_test.hpp>

// common/heap_trim.hpp: a burst of teardowns costs one trim per gap, and
// the last request of a burst is still served.

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "common/heap_trim.hpp"
#include "common/tuning.hpp"

using rdmactor::heap_trim_pacer;
using namespace std::chrono_literals;

namespace {

using time_point = heap_trim_pacer::clock_type::time_point;

const time_point t0 = time_point{} + 1h;

/// Runs the pacer as the trimmer thread does (a trim begins when the
/// pacer lets the waiting request go), with requests at the given times;
/// returns the times trims began.
std::vector<time_point> trims_for(heap_trim_pacer& p,
                                  const std::vector<time_point>& asks) {
  std::vector<time_point> trims;
  time_point pending_since;
  auto serve_until = [&](time_point limit) {
    while (p.pending()) {
      auto at = std::max(p.due(), pending_since);
      if (at > limit)
        break;
      p.start(at);
      p.finish(at + 1ms);
      trims.push_back(at);
    }
  };
  for (auto at : asks) {
    serve_until(at);
    if (!p.pending())
      pending_since = at;
    p.ask();
    serve_until(at);
  }
  serve_until(time_point::max());
  return trims;
}

} // namespace

BOOST_AUTO_TEST_SUITE(heap_trim_suite)

BOOST_AUTO_TEST_CASE(a_lone_request_is_served_at_once) {
  heap_trim_pacer p{100ms, 10};
  BOOST_TEST(!p.pending());
  p.ask();
  BOOST_TEST(p.pending());
  BOOST_TEST((p.due() <= t0));
  p.start(t0);
  BOOST_TEST(!p.pending());
  // Requests further apart than the gap go at once, each.
  heap_trim_pacer q{100ms, 10};
  auto trims = trims_for(q, {t0, t0 + 5s, t0 + 9s});
  BOOST_TEST(trims.size() == 3u);
  BOOST_TEST((trims[1] == t0 + 5s));
  BOOST_TEST((trims[2] == t0 + 9s));
}

BOOST_AUTO_TEST_CASE(
    a_burst_costs_one_trim_per_gap_and_its_last_request_is_served) {
  heap_trim_pacer p{100ms, 10};
  // 10,000 teardowns, one every 50 us: 500 ms of requests.
  std::vector<time_point> asks;
  for (int i = 0; i < 10000; ++i)
    asks.push_back(t0 + i * 50us);
  auto trims = trims_for(p, asks);
  // The first at once, then one per gap while requests come, and one for
  // the requests after the last trim began: 500 ms / 100 ms + 1.
  BOOST_TEST(trims.size() == 6u);
  BOOST_TEST((trims.front() == t0));
  for (size_t i = 1; i < trims.size(); ++i)
    BOOST_TEST((trims[i] - trims[i - 1] >= 100ms));
  // The last request (t0 + 499.95 ms) is served by a trim that began after it.
  BOOST_TEST((trims.back() >= asks.back()));
  BOOST_TEST(!p.pending());
}

BOOST_AUTO_TEST_CASE(
    a_long_trim_widens_the_gap_to_keep_the_trimmer_at_a_tenth_of_a_core) {
  heap_trim_pacer p{100ms, 10};
  p.ask();
  p.start(t0);
  p.finish(t0 + 40ms); // a heap with much freed memory
  p.ask();
  BOOST_TEST((p.due() == t0 + 400ms));
  p.start(t0 + 400ms);
  p.finish(t0 + 402ms); // little left to return
  p.ask();
  BOOST_TEST((p.due() == t0 + 500ms));
}

BOOST_AUTO_TEST_CASE(a_request_during_a_trim_gets_a_trim_of_its_own) {
  heap_trim_pacer p{100ms, 10};
  p.ask();
  p.start(t0);
  // Freed while the trim ran (it may have passed that memory already).
  p.ask();
  BOOST_TEST(p.pending());
  BOOST_TEST((p.due() == t0 + 100ms));
}

// The process's trimmer thread serves requests: a burst of them from
// several threads starts far fewer trims than requests, and its last
// request is served (a trim begins after it).
BOOST_AUTO_TEST_CASE(the_trimmer_thread_serves_a_burst_with_few_trims) {
  auto before = rdmactor::heap_trims_started();
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 500; ++i)
        BOOST_CHECK(rdmactor::trim_heap());
    });
  for (auto& t : threads)
    t.join();
  // Bounded wait (the trimmer's thread may start late under a sanitizer).
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!rdmactor::heap_trim_idle()
         && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  auto elapsed = std::chrono::steady_clock::now() - start;
  BOOST_REQUIRE(rdmactor::heap_trim_idle());
  auto total = rdmactor::heap_trims_started() - before;
  BOOST_TEST(total >= 1u);
  // One at once, then one per gap at most while requests waited.
  auto gaps
      = elapsed / std::chrono::milliseconds{rdmactor::tuning::heap_trim_gap_ms};
  BOOST_TEST(total <= static_cast<uint64_t>(gaps) + 1u);
  BOOST_TEST(total < 2000u);
}

BOOST_AUTO_TEST_SUITE_END()
