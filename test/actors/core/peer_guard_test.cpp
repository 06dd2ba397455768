#define BOOST_TEST_MODULE peer_guard
#include <boost/test/unit_test.hpp>

#include <chrono>

#include "actors/core/peer_guard.hpp"
#include "rdmactor/error.hpp"

using namespace rdmactor;

namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

const auto t0 = clock_type::now();

options limits(uint32_t noise, uint32_t violations, uint32_t log_lines) {
  options o;
  o.peer_max_noise = noise;
  o.peer_noise_window_ms = 1000;
  o.peer_max_violations = violations;
  o.peer_max_log_lines = log_lines;
  o.peer_log_window_ms = 1000;
  return o;
}

} // namespace

BOOST_AUTO_TEST_SUITE(peer_guard_suite)

BOOST_AUTO_TEST_CASE(noise_over_the_budget_of_a_window_ends_the_connection) {
  peer_guard g{limits(3, 100, 10)};
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(!g.noise("a stray Pong", t0).has_value());
  auto end = g.noise("a stray Pong", t0 + milliseconds{10});
  BOOST_REQUIRE(end.has_value());
  BOOST_TEST(code_of(end->reason) == errc::quota_exceeded);
  BOOST_TEST(render(end->reason).find("peer-max-noise") != std::string::npos);
  BOOST_TEST(end->why.find("the last a stray Pong") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(noise_spread_over_windows_is_tolerated) {
  peer_guard g{limits(3, 100, 10)};
  for (int w = 0; w < 5; ++w)
    for (int i = 0; i < 3; ++i)
      BOOST_TEST(!g.noise("x", t0 + milliseconds{1001 * w}).has_value());
}

BOOST_AUTO_TEST_CASE(violations_in_a_row_end_it_and_a_served_request_resets) {
  peer_guard g{limits(1000, 3, 10)};
  BOOST_TEST(!g.violation(t0).has_value());
  BOOST_TEST(!g.violation(t0).has_value());
  g.accepted(); // a good request in between: the row starts over
  BOOST_TEST(!g.violation(t0).has_value());
  BOOST_TEST(!g.violation(t0).has_value());
  auto end = g.violation(t0);
  BOOST_REQUIRE(end.has_value());
  BOOST_TEST(render(end->reason).find("peer-max-violations")
             != std::string::npos);
  BOOST_TEST(end->why.find("3 refused requests") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_violation_is_noise_too) {
  peer_guard g{limits(2, 1000, 10)};
  BOOST_TEST(!g.violation(t0).has_value());
  g.accepted();
  BOOST_TEST(!g.violation(t0).has_value());
  g.accepted();
  auto end = g.violation(t0); // third piece of noise in the window
  BOOST_REQUIRE(end.has_value());
  BOOST_TEST(render(end->reason).find("peer-max-noise") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(log_lines_stay_within_the_peers_budget) {
  peer_guard g{limits(1000, 1000, 2)};
  BOOST_TEST(bool(g.may_log(spdlog::level::err, t0)));
  BOOST_TEST(bool(g.may_log(spdlog::level::err, t0)));
  BOOST_TEST(!g.may_log(spdlog::level::err, t0));
  BOOST_TEST(!g.may_log(spdlog::level::err, t0));
  // The next window's first line reports the two held back.
  auto v = g.may_log(spdlog::level::err, t0 + milliseconds{1001});
  BOOST_TEST(bool(v));
  BOOST_TEST(v.denied_before >= 2u);
}

BOOST_AUTO_TEST_CASE(a_filtered_level_spends_no_budget) {
  peer_guard g{limits(1000, 1000, 1)};
  BOOST_REQUIRE(!log().should_log(spdlog::level::trace));
  for (int i = 0; i < 10; ++i)
    BOOST_TEST(!g.may_log(spdlog::level::trace, t0));
  BOOST_TEST(bool(g.may_log(spdlog::level::err, t0)));
  BOOST_TEST(g.take_denied_lines() == 0u);
  BOOST_TEST(!g.may_log(spdlog::level::err, t0));
  BOOST_TEST(g.take_denied_lines() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
