#define BOOST_TEST_MODULE contention
#include <boost/test/unit_test.hpp>

#include <chrono>

#include "common/tuning.hpp"
#include "scheduling/contention.hpp"

using namespace rdmactor::transport;
namespace tuning = rdmactor::tuning;

namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

/// Feeds `e` one sample per millisecond for `ms` milliseconds from `t`
/// (advanced): in each, a polling thread of ours ran `run` and waited
/// `wait` microseconds.  Returns the verdict after the last sample.
bool feed(contention_estimate& e, clock_type::time_point& t, int ms, int run,
          int wait) {
  bool verdict = e.contended();
  for (int i = 0; i < ms; ++i) {
    t += milliseconds{1};
    verdict = e.update(t, microseconds{run}, microseconds{wait});
  }
  return verdict;
}

struct fixture {
  clock_type::time_point t = clock_type::now();
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(contention_estimate_suite, fixture)

BOOST_AUTO_TEST_CASE(our_own_threads_taking_turns_are_no_contention) {
  // Two nodes of one process ping-pong on two cores: our threads wait for
  // each other now and then (a share of 0.2-0.4).
  contention_estimate e;
  for (int i = 0; i < 50; ++i) {
    BOOST_TEST(!feed(e, t, 3, 800, 200));
    BOOST_TEST(!feed(e, t, 1, 600, 400));
  }
  BOOST_TEST(e.starved() < tuning::contention_leave_share);
}

BOOST_AUTO_TEST_CASE(two_cpu_hogs_are_noticed_within_a_few_windows) {
  contention_estimate e;
  feed(e, t, 100, 980, 20);
  BOOST_TEST(!e.contended());
  // Two hogs: our spinner waits most of the time it wants a core.
  BOOST_TEST(feed(e, t, 3 * tuning::contention_window_ms, 150, 850));
  BOOST_TEST(e.starved() >= tuning::contention_enter_share);
  // Sleeping now, it still waits when woken: the verdict stays.
  BOOST_TEST(feed(e, t, 200, 60, 140));
  // The hogs end: polling comes back.
  BOOST_TEST(!feed(e, t, 3 * tuning::contention_window_ms, 900, 20));
}

BOOST_AUTO_TEST_CASE(no_verdict_before_the_average_spans_a_window) {
  contention_estimate e;
  BOOST_TEST(!feed(e, t, tuning::contention_window_ms - 2, 100, 900));
  BOOST_TEST(feed(e, t, 3 * tuning::contention_window_ms, 100, 900));
}

BOOST_AUTO_TEST_CASE(a_short_wait_is_no_contention) {
  contention_estimate e;
  feed(e, t, 100, 980, 20);
  BOOST_TEST(!feed(e, t, 2, 0, 1000));
  BOOST_TEST(!feed(e, t, 50, 980, 20));
}

BOOST_AUTO_TEST_CASE(samples_of_a_thread_that_hardly_ran_say_nothing) {
  contention_estimate e;
  feed(e, t, 100, 980, 20);
  auto before = e.starved();
  // A few microseconds of waiting out of a few of running: skipped.
  BOOST_TEST(!feed(e, t, 100, 5, 20));
  BOOST_TEST(e.starved() == before);
}

BOOST_AUTO_TEST_CASE(between_the_thresholds_the_verdict_stays) {
  contention_estimate e;
  feed(e, t, 100, 980, 20);
  // A share of 0.5: between leave (0.45) and enter (0.6).
  BOOST_TEST(!feed(e, t, 300, 500, 500));
  BOOST_TEST(feed(e, t, 300, 100, 900));
  BOOST_TEST(feed(e, t, 300, 500, 500));
  BOOST_TEST(!feed(e, t, 300, 800, 200));
}

BOOST_AUTO_TEST_CASE(the_average_does_not_depend_on_the_spacing) {
  contention_estimate a;
  contention_estimate b;
  auto ta = t;
  auto tb = t;
  a.update(ta, microseconds{900}, microseconds{100}); // both start here
  b.update(tb, microseconds{900}, microseconds{100});
  feed(a, ta, 60, 200, 800);
  for (int i = 0; i < 6; ++i) {
    tb += milliseconds{10};
    b.update(tb, microseconds{2000}, microseconds{8000});
  }
  BOOST_TEST(a.starved() == b.starved(), boost::test_tools::tolerance(0.02));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(contention_monitor_suite)

BOOST_AUTO_TEST_CASE(the_monitor_reads_this_thread_or_says_no) {
  auto& m = contention_monitor::instance();
  // A verdict, whatever the machine: no crash, no wait.
  auto now = clock_type::now();
  static_cast<void>(m.contended(now));
  static_cast<void>(m.contended(now + milliseconds{5}));
  m.force(1);
  BOOST_TEST(m.contended(now));
  m.force(0);
  BOOST_TEST(!m.contended(now + milliseconds{10}));
  m.force(-1);
  m.enable(false);
  BOOST_TEST(!m.contended(now + milliseconds{20}));
  m.enable(true);
}

BOOST_AUTO_TEST_SUITE_END()
