#define BOOST_TEST_MODULE direct_poll
#include <boost/test/unit_test.hpp>

// The work an actor runs without messages (scheduling/direct_poll.hpp):
// the tail (the agent's held acknowledgement flush) never runs in the
// activation that asked for it, runs after the messages that waited at its
// trip through the worker's queue, and runs exactly once; a wake without a
// message (the CQ's notification) is never lost.  A probe actor
// whose `resume` uses `resume_with_polls`, on one CAF worker so that the
// order of activations is CAF's queue order.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "rdmactor/scheduler_job.hpp"
#include "scheduling/direct_poll.hpp"

using namespace rdmactor::transport;

namespace {

using ask_atom = caf::atom_constant<caf::atom("ask")>;
using note_atom = caf::atom_constant<caf::atom("note")>;
using tail_atom = caf::atom_constant<caf::atom("tail")>;
using noise_atom = caf::atom_constant<caf::atom("noise")>;

/// What the probe did, in order; shared with the test's thread.
class journal {
public:
  void add(std::string what) {
    std::lock_guard<std::mutex> guard{mtx_};
    entries_.push_back(std::move(what));
    cv_.notify_all();
  }

  /// Waits until `n` entries are there (at most 5 s), then a little longer
  /// for any that should not come; returns what was recorded.
  std::vector<std::string> wait_for(size_t n) {
    std::unique_lock<std::mutex> guard{mtx_};
    cv_.wait_for(guard, std::chrono::seconds(5),
                 [&] { return entries_.size() >= n; });
    cv_.wait_for(guard, std::chrono::milliseconds(50),
                 [&] { return entries_.size() > n; });
    return entries_;
  }

  /// Waits until `what` was recorded `n` times (at most 5 s); returns how
  /// often it was.
  size_t wait_count(const std::string& what, size_t n) {
    std::unique_lock<std::mutex> guard{mtx_};
    auto count = [&] {
      return static_cast<size_t>(
          std::count(entries_.begin(), entries_.end(), what));
    };
    cv_.wait_for(guard, std::chrono::seconds(5), [&] { return count() >= n; });
    return count();
  }

private:
  std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<std::string> entries_;
};

/// `(ask_atom, echo)`: wants the tail, and asks `echo` (if any) to answer
/// with a note; `(note_atom, s)`: records `s`.  The tail records "tail".
class probe : public rdmactor::with_scheduler_job<caf::event_based_actor> {
public:
  probe(caf::actor_config& cfg, journal& log)
      : rdmactor::with_scheduler_job<caf::event_based_actor>(cfg), log_(log) {}

  caf::behavior make_behavior() override {
    return {
        [this](ask_atom, const caf::actor& echo) {
          log_.add("ask");
          dp_.tail.store(true);
          if (echo)
            send(echo, note_atom::value, std::string{"answer"});
        },
        [this](note_atom, const std::string& what) { log_.add(what); },
        [this](tail_atom) { log_.add("tail"); },
        [this](cq_event_atom) { log_.add("notified"); },
        [](noise_atom) {}, // keeps the probe busy
    };
  }

  /// As the fabric's thread calls it (wake_target::cq_event).
  void wake() {
    wake_without_message(this, dp_);
  }

  caf::resumable::resume_result resume(caf::execution_unit* ctx,
                                       size_t max_throughput) override {
    bool alive = !getf(is_terminated_flag);
    return resume_with_polls<caf::actor, tail_atom>(
        this, dp_, alive,
        [&](const due_work& w) {
          if (w.tail)
            log_.add("tail");
          if (w.notified)
            log_.add("notified");
          if (w.poll)
            log_.add("poll"); // nobody asks for one here
        },
        [&] { return caf::event_based_actor::resume(ctx, max_throughput); });
  }

private:
  journal& log_;
  direct_poll dp_;
};

/// Answers a note with a note to the probe (the user actor that answers
/// the data the agent handed it).
caf::behavior echo_impl(caf::event_based_actor* self, caf::actor probe) {
  return {[self, probe](note_atom, const std::string& what) {
    self->send(probe, note_atom::value, what);
  }};
}

/// One worker: CAF's queue order is the order of activations.  A bounded
/// max-throughput, as rdmactor's config sets it: an activation ends after
/// 8 messages, so work without messages gets its turn under a stream.
struct one_worker_config : caf::actor_system_config {
  one_worker_config() {
    set("scheduler.max-threads", 1);
    set("scheduler.max-throughput", 8);
  }
};

struct fixture {
  journal log;
  one_worker_config cfg;
  caf::actor_system sys{cfg};
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(direct_poll_tail, fixture)

// Nobody answers: the tail runs once, after the activation that asked.
BOOST_AUTO_TEST_CASE(a_tail_runs_once_after_the_activation_that_asked) {
  auto p = sys.spawn<probe>(std::ref(log));
  caf::anon_send(p, ask_atom::value, caf::actor{});
  auto got = log.wait_for(2);
  BOOST_TEST(got == (std::vector<std::string>{"ask", "tail"}),
             boost::test_tools::per_element());
  caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
}

// The actor the probe handed a message to runs before the tail's trip
// ends, and its answer is handled before the tail: the held flush goes
// behind the answer that may carry its acknowledgements.
BOOST_AUTO_TEST_CASE(the_tail_goes_behind_the_answer_that_came_meanwhile) {
  auto p = sys.spawn<probe>(std::ref(log));
  auto echo = sys.spawn(echo_impl, p);
  caf::anon_send(p, ask_atom::value, echo);
  auto got = log.wait_for(3);
  BOOST_TEST(got == (std::vector<std::string>{"ask", "answer", "tail"}),
             boost::test_tools::per_element());
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
}

// Asked again and again, answered every other time: one tail per request,
// each behind its answer, none lost, none twice.
BOOST_AUTO_TEST_CASE(every_request_gets_its_tail) {
  auto p = sys.spawn<probe>(std::ref(log));
  auto echo = sys.spawn(echo_impl, p);
  std::vector<std::string> expected;
  for (size_t i = 0; i < 20; ++i) {
    bool answered = i % 2 == 0;
    expected.emplace_back("ask");
    if (answered)
      expected.emplace_back("answer");
    expected.emplace_back("tail");
    caf::anon_send(p, ask_atom::value, answered ? echo : caf::actor{});
    log.wait_for(expected.size());
  }
  auto got = log.wait_for(expected.size());
  BOOST_TEST(got == expected, boost::test_tools::per_element());
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(direct_poll_wake, fixture)

// An idle probe (mailbox blocked) is scheduled by the wake alone, and no
// wake is lost while another thread keeps sending it messages: each wake
// is seen before the next one starts.
BOOST_AUTO_TEST_CASE(a_wake_schedules_the_actor_and_is_never_lost) {
  auto hdl = sys.spawn<probe>(std::ref(log));
  auto* p = static_cast<probe*>(caf::actor_cast<caf::abstract_actor*>(hdl));
  size_t wakes = 0;
  for (; wakes < 50; ++wakes) {
    p->wake();
    BOOST_REQUIRE_EQUAL(log.wait_count("notified", wakes + 1), wakes + 1);
  }
  std::atomic<bool> stop{false};
  std::thread sender{[&] {
    while (!stop)
      caf::anon_send(hdl, noise_atom::value);
  }};
  size_t lost_at = 0;
  for (; wakes < 550 && lost_at == 0; ++wakes) {
    p->wake();
    if (log.wait_count("notified", wakes + 1) != wakes + 1)
      lost_at = wakes;
  }
  stop = true;
  sender.join();
  BOOST_TEST(lost_at == 0u, "wake " << lost_at << " was lost");
  caf::anon_send_exit(hdl, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()
