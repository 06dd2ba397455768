#define BOOST_TEST_MODULE in_order_reader
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "actors/core/in_order_reader.hpp"

using namespace rdmactor;

namespace {

using reader = in_order_reader<std::string>;
using clock_type = std::chrono::steady_clock;

/// What `drain` handed on, as "item" or "item!" for a failed one.
std::vector<std::string> drain_all(reader& r) {
  std::vector<std::string> out;
  r.drain([&](std::string&& x, bool failed) {
    out.push_back(failed ? x + "!" : x);
  });
  return out;
}

using strings = std::vector<std::string>;

} // namespace

BOOST_AUTO_TEST_SUITE(in_order_reader_suite)

BOOST_AUTO_TEST_CASE(items_behind_a_read_wait_for_it) {
  reader r;
  auto t0 = clock_type::now();
  auto a = r.push_reading("a", 100, t0 + std::chrono::seconds(1));
  r.push_ready("b", 10);
  auto c = r.push_reading("c", 50, t0 + std::chrono::seconds(1));
  r.push_ready("d", 1);
  BOOST_TEST(r.bytes() == 161u);
  BOOST_TEST(drain_all(r).empty()); // "a" is still being read
  // "c" finishes first: still held behind "a".
  BOOST_REQUIRE(r.complete(c, true) != nullptr);
  BOOST_TEST(drain_all(r).empty());
  BOOST_REQUIRE(r.complete(a, true) != nullptr);
  BOOST_TEST(drain_all(r) == (strings{"a", "b", "c", "d"}));
  BOOST_TEST(r.empty());
  BOOST_TEST(r.bytes() == 0u);
}

BOOST_AUTO_TEST_CASE(a_failed_read_is_handed_on_in_its_turn) {
  reader r;
  auto a = r.push_reading("a", 100, clock_type::time_point::max());
  r.push_failed("refused");
  r.push_ready("b", 10);
  auto* item = r.complete(a, false);
  BOOST_REQUIRE(item != nullptr);
  BOOST_TEST(*item == "a");
  BOOST_TEST(drain_all(r) == (strings{"a!", "refused!", "b"}));
}

BOOST_AUTO_TEST_CASE(unknown_or_second_completions_are_ignored) {
  reader r;
  auto a = r.push_reading("a", 1, clock_type::time_point::max());
  BOOST_TEST(r.complete(a + 7, true) == nullptr);
  BOOST_TEST(r.complete(a, true) != nullptr);
  BOOST_TEST(r.complete(a, false) == nullptr); // answered once
  BOOST_TEST(drain_all(r) == (strings{"a"}));
  BOOST_TEST(r.complete(a, true) == nullptr); // handed on already
  // After clear, a late completion finds nothing.
  auto b = r.push_reading("b", 5, clock_type::time_point::max());
  r.clear();
  BOOST_TEST(r.bytes() == 0u);
  BOOST_TEST(r.complete(b, true) == nullptr);
  BOOST_TEST(drain_all(r).empty());
}

BOOST_AUTO_TEST_CASE(drain_stops_when_told) {
  reader r;
  r.push_ready("a", 1);
  r.push_ready("b", 2);
  std::vector<std::string> out;
  r.drain([&](std::string&& x, bool) { out.push_back(x); },
          [&] { return out.empty(); });
  BOOST_TEST(out == (strings{"a"}));
  BOOST_TEST(r.bytes() == 2u); // "b" still counts
}

BOOST_AUTO_TEST_CASE(deadlines_cover_only_reads_in_flight) {
  reader r;
  auto t0 = clock_type::now();
  auto [none, none_stalled] = r.deadlines(t0);
  BOOST_TEST((none == clock_type::time_point::max()));
  BOOST_TEST(!none_stalled);
  auto a = r.push_reading("a", 1, t0 + std::chrono::seconds(5));
  r.push_reading("b", 1, t0 + std::chrono::seconds(2));
  auto [next, stalled] = r.deadlines(t0);
  BOOST_TEST((next == t0 + std::chrono::seconds(2)));
  BOOST_TEST(!stalled);
  BOOST_TEST(r.deadlines(t0 + std::chrono::seconds(2)).second);
  r.complete(a, true);
  // "b" alone counts now; done items have no deadline.
  BOOST_TEST((r.deadlines(t0).first == t0 + std::chrono::seconds(2)));
}

BOOST_AUTO_TEST_SUITE_END()
