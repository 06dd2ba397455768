#define BOOST_TEST_MODULE contention
#include <boost/test/unit_test.hpp>

#include <chrono>

#include "common/tuning.hpp"
#include "transport/contention.hpp"

using namespace rdmactor::transport;
namespace tuning = rdmactor::tuning;

namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

/// Feeds `e` one sample per millisecond for `ms` milliseconds from `t`
/// (advanced), with `runnable` threads on the machine and `busy` cores of
/// ours; `cpu` is our CPU time so far.  Returns the verdict after the last
/// sample.
bool feed(contention_estimate& e, clock_type::time_point& t, nanoseconds& cpu,
          int ms, uint32_t runnable, double busy) {
  bool verdict = e.contended();
  for (int i = 0; i < ms; ++i) {
    t += milliseconds{1};
    cpu += nanoseconds{static_cast<int64_t>(busy * 1e6)};
    verdict = e.update(t, runnable, cpu);
  }
  return verdict;
}

struct fixture {
  clock_type::time_point t = clock_type::now();
  nanoseconds cpu{0};
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(contention_estimate_suite, fixture)

BOOST_AUTO_TEST_CASE(our_own_threads_on_all_cores_are_no_contention) {
  // Two nodes of one process ping-pong on two cores: both owners spin and
  // workers of ours come and go, so threads of ours wait for cores too.
  contention_estimate e{2};
  for (int i = 0; i < 50; ++i) {
    BOOST_TEST(!feed(e, t, cpu, 3, 3, 1.9));
    BOOST_TEST(!feed(e, t, cpu, 1, 5, 1.9));
  }
  BOOST_TEST(e.runnable() > 2.0);
  BOOST_TEST(e.foreign() < tuning::contention_leave_cores);
}

BOOST_AUTO_TEST_CASE(two_cpu_hogs_are_noticed_within_a_few_windows) {
  contention_estimate e{2};
  feed(e, t, cpu, 100, 2, 1.9);
  BOOST_TEST(!e.contended());
  // Two hogs: our spinners are runnable but get a fraction of the cores.
  BOOST_TEST(feed(e, t, cpu, 3 * tuning::contention_window_ms, 4, 0.5));
  BOOST_TEST(e.foreign() >= tuning::contention_enter_cores);
  // Our owners sleep now; the hogs still run.
  BOOST_TEST(feed(e, t, cpu, 200, 3, 0.3));
  // The hogs end: polling comes back.
  BOOST_TEST(!feed(e, t, cpu, 3 * tuning::contention_window_ms, 1, 0.6));
}

BOOST_AUTO_TEST_CASE(no_verdict_before_the_averages_span_a_window) {
  contention_estimate e{2};
  BOOST_TEST(!feed(e, t, cpu, tuning::contention_window_ms - 2, 4, 0.2));
  BOOST_TEST(feed(e, t, cpu, 3 * tuning::contention_window_ms, 4, 0.2));
}

BOOST_AUTO_TEST_CASE(a_short_burst_of_other_threads_is_no_contention) {
  contention_estimate e{2};
  feed(e, t, cpu, 100, 2, 1.9);
  BOOST_TEST(!feed(e, t, cpu, 2, 6, 1.0));
  BOOST_TEST(!feed(e, t, cpu, 50, 2, 1.9));
}

BOOST_AUTO_TEST_CASE(hogs_on_cores_we_do_not_need_are_no_contention) {
  // Sixteen cores: two hogs and our two spinners all have one.
  contention_estimate e{16};
  BOOST_TEST(!feed(e, t, cpu, 500, 4, 2.0));
  BOOST_TEST(e.foreign() >= tuning::contention_enter_cores);
}

BOOST_AUTO_TEST_CASE(between_the_thresholds_the_verdict_stays) {
  contention_estimate e{2};
  feed(e, t, cpu, 100, 2, 1.9);
  // Others take about 0.5 cores: between leave (0.4) and enter (0.75).
  BOOST_TEST(!feed(e, t, cpu, 300, 3, 1.5));
  BOOST_TEST(feed(e, t, cpu, 300, 4, 0.5));
  BOOST_TEST(feed(e, t, cpu, 300, 3, 1.5));
  BOOST_TEST(!feed(e, t, cpu, 300, 3, 1.9));
}

BOOST_AUTO_TEST_CASE(the_average_does_not_depend_on_the_spacing) {
  contention_estimate a{2};
  contention_estimate b{2};
  auto ta = t;
  auto tb = t;
  auto ca = cpu;
  auto cb = cpu;
  a.update(ta, 4, ca); // both start here
  b.update(tb, 4, cb);
  feed(a, ta, ca, 60, 4, 0.2);
  for (int i = 0; i < 6; ++i) {
    tb += milliseconds{10};
    cb += nanoseconds{2000000};
    b.update(tb, 4, cb);
  }
  BOOST_TEST(a.runnable() == b.runnable(), boost::test_tools::tolerance(0.05));
  BOOST_TEST(a.own() == b.own(), boost::test_tools::tolerance(0.05));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(contention_monitor_suite)

BOOST_AUTO_TEST_CASE(the_monitor_reads_the_machine_or_says_no) {
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
