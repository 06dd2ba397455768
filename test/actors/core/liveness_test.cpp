#define BOOST_TEST_MODULE liveness
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>

#include "actors/core/liveness.hpp"

using namespace rdmactor;

namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;
using verdict = liveness::verdict;

const auto t0 = clock_type::now();

/// A liveness with a 100 ms period whose peer offered everything and was
/// last heard at t0.
liveness offered() {
  liveness l{milliseconds{100}};
  l.offered(true, true);
  l.heard(t0);
  return l;
}

} // namespace

BOOST_AUTO_TEST_SUITE(liveness_suite)

BOOST_AUTO_TEST_CASE(off_unless_both_sides_want_it) {
  liveness zero{milliseconds{0}};
  zero.offered(true, true);
  BOOST_TEST(!zero.keepalive_on());
  liveness not_offered{milliseconds{100}};
  not_offered.offered(true, false);
  BOOST_TEST(!not_offered.keepalive_on());
  auto s = not_offered.tick(t0 + milliseconds{1000});
  BOOST_TEST((s.what == verdict::wait));
  BOOST_TEST((s.next == clock_type::time_point::max()));
  BOOST_TEST(offered().keepalive_on());
}

BOOST_AUTO_TEST_CASE(a_silent_peer_is_pinged_after_a_period) {
  auto l = offered();
  auto s = l.tick(t0 + milliseconds{50});
  BOOST_TEST((s.what == verdict::wait));
  BOOST_TEST((s.next == t0 + milliseconds{100}));
  s = l.tick(t0 + milliseconds{100});
  BOOST_TEST((s.what == verdict::ping));
  BOOST_TEST((s.next == t0 + milliseconds{200}));
}

// A staggered silence lies in [3/4, 1] of the period; the Ping goes after
// it, death still a period after the Ping (within 2 periods of the last
// frame).
BOOST_AUTO_TEST_CASE(a_staggered_silence_pings_early_and_keeps_the_bound) {
  for (uint64_t r : {uint64_t{0}, uint64_t{7}, uint64_t{25}, ~uint64_t{0}}) {
    auto silence = liveness::staggered(milliseconds{100}, r);
    BOOST_TEST(silence.count() >= 75);
    BOOST_TEST(silence.count() <= 100);
  }
  BOOST_TEST(liveness::staggered(milliseconds{100}, 0).count() == 100);
  BOOST_TEST(liveness::staggered(milliseconds{100}, 25).count() == 75);
  liveness l{milliseconds{100}, milliseconds{80}};
  l.offered(true, true);
  l.heard(t0);
  BOOST_TEST(l.silence().count() == 80);
  auto s = l.tick(t0 + milliseconds{50});
  BOOST_TEST((s.next == t0 + milliseconds{80}));
  BOOST_TEST((l.tick(t0 + milliseconds{80}).what == verdict::ping));
  l.pinged(9, t0 + milliseconds{80});
  BOOST_TEST((l.tick(t0 + milliseconds{179}).what == verdict::wait));
  BOOST_TEST((l.tick(t0 + milliseconds{180}).what == verdict::dead));
  // A silence over the period is the period.
  BOOST_TEST((liveness{milliseconds{100}, milliseconds{500}}.silence().count()
              == 100));
}

BOOST_AUTO_TEST_CASE(any_frame_postpones_the_ping) {
  auto l = offered();
  l.heard(t0 + milliseconds{90});
  auto s = l.tick(t0 + milliseconds{100});
  BOOST_TEST((s.what == verdict::wait));
  BOOST_TEST((s.next == t0 + milliseconds{190}));
}

BOOST_AUTO_TEST_CASE(no_answer_to_the_ping_within_a_period_is_death) {
  auto l = offered();
  BOOST_TEST((l.tick(t0 + milliseconds{100}).what == verdict::ping));
  l.pinged(7, t0 + milliseconds{100});
  auto s = l.tick(t0 + milliseconds{150});
  BOOST_TEST((s.what == verdict::wait));
  BOOST_TEST((s.next == t0 + milliseconds{200}));
  BOOST_TEST((l.tick(t0 + milliseconds{200}).what == verdict::dead));
}

BOOST_AUTO_TEST_CASE(a_frame_after_the_ping_answers_it_like_the_pong) {
  auto l = offered();
  l.tick(t0 + milliseconds{100});
  l.pinged(7, t0 + milliseconds{100});
  l.heard(t0 + milliseconds{120}); // any frame, not the Pong
  auto s = l.tick(t0 + milliseconds{200});
  BOOST_TEST((s.what == verdict::wait));
  BOOST_TEST((s.next == t0 + milliseconds{220}));
  // Silent again for a period: the next Ping.
  BOOST_TEST((l.tick(t0 + milliseconds{220}).what == verdict::ping));
}

BOOST_AUTO_TEST_CASE(only_the_pong_of_our_ping_is_taken_once) {
  auto l = offered();
  BOOST_TEST(!l.take_pong(7)); // nothing asked
  l.tick(t0 + milliseconds{100});
  l.pinged(7, t0 + milliseconds{100});
  BOOST_TEST(!l.take_pong(8));
  BOOST_TEST(!l.take_pong(0));
  BOOST_TEST(l.take_pong(7));
  BOOST_TEST(!l.take_pong(7)); // a second one is noise
}

BOOST_AUTO_TEST_CASE(after_goodbye_no_ping_and_the_first_reason_stays) {
  auto l = offered();
  BOOST_TEST(l.said_goodbye("shutting down"));
  BOOST_TEST(!l.said_goodbye("again"));
  BOOST_TEST(l.peer_said_goodbye());
  BOOST_TEST(l.goodbye_reason() == "shutting down");
  auto s = l.tick(t0 + milliseconds{1000});
  BOOST_TEST((s.what == verdict::wait));
  BOOST_TEST((s.next == clock_type::time_point::max()));
}

BOOST_AUTO_TEST_CASE(a_reason_is_kept_printable_and_bounded) {
  BOOST_TEST(liveness::sanitize(std::string{"a\nb\x01\x7f"} + "c") == "a?b??c");
  auto long_reason = std::string(1000, 'x');
  BOOST_TEST(liveness::sanitize(long_reason).size() == liveness::max_reason);
  auto l = offered();
  l.said_goodbye(std::string{"bye\x1b[31m"});
  BOOST_TEST(l.goodbye_reason() == "bye?[31m");
}

BOOST_AUTO_TEST_SUITE_END()
