#define BOOST_TEST_MODULE scheduler_job
#include <boost/test/unit_test.hpp>

// The job CAF's scheduler queues for an actor in its place
// (include/rdmactor/scheduler_job.hpp): every way an actor gets scheduled
// (launch, a message to its idle mailbox, a wake without a message) queues the
// job, never the actor; CAF's per-activation cast of it to an actor fails; the
// actor runs as before; requests to a terminated actor still get an error;
// and a queued job keeps its actor alive.  On CAF's test coordinator,
// whose queue (`jobs`) this suite can read.

#include <atomic>
#include <chrono>
#include <string>
#include <type_traits>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "rdmactor/scheduler_job.hpp"

namespace {

using ping_atom = caf::atom_constant<caf::atom("ping")>;

/// Counts its activations, answers `ping` with the count of pings.
class counter : public rdmactor::with_scheduler_job<caf::event_based_actor> {
public:
  using super = rdmactor::with_scheduler_job<caf::event_based_actor>;

  counter(caf::actor_config& cfg, std::atomic<int>& alive)
      : super(cfg), alive_(alive) {
    ++alive_;
  }

  ~counter() override {
    --alive_;
  }

  caf::behavior make_behavior() override {
    return {[this](ping_atom) { return ++pings; }};
  }

  caf::resumable::resume_result resume(caf::execution_unit* ctx,
                                       size_t max_throughput) override {
    ++activations;
    return super::resume(ctx, max_throughput);
  }

  int pings = 0;
  int activations = 0;

private:
  std::atomic<int>& alive_;
};

struct test_config : caf::actor_system_config {
  test_config() {
    set("scheduler.policy", caf::atom("testing"));
  }
};

struct fixture {
  test_config cfg;
  caf::actor_system sys{cfg};
  caf::scheduler::test_coordinator& sched{
      dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())};
  std::atomic<int> alive{0};

  /// Checks that the only queued job is not the actor and not castable
  /// to one, then runs it.
  void run_the_job_of(caf::scheduled_actor* actor) {
    BOOST_REQUIRE_EQUAL(sched.jobs.size(), 1u);
    caf::resumable* job = sched.jobs.front();
    BOOST_TEST(job != static_cast<caf::resumable*>(actor));
    BOOST_TEST(dynamic_cast<caf::abstract_actor*>(job) == nullptr);
    BOOST_TEST(job->subtype() == caf::resumable::unspecified);
    sched.run();
  }

  /// Ends the actor and runs what that queues.
  void stop(const caf::actor& hdl) {
    caf::anon_send_exit(hdl, caf::exit_reason::user_shutdown);
    sched.run();
  }

  counter* raw(const caf::actor& hdl) {
    return static_cast<counter*>(caf::actor_cast<caf::abstract_actor*>(hdl));
  }

  template <class Handle>
  static caf::scheduled_actor* scheduled(const Handle& hdl) {
    return dynamic_cast<caf::scheduled_actor*>(
        caf::actor_cast<caf::abstract_actor*>(hdl));
  }
};

struct tally {
  int pings = 0;
};

/// A function-based, stateful actor: answers `ping` with its count.
caf::behavior tally_impl(caf::stateful_actor<tally>* self, int step) {
  return {[self, step](ping_atom) { return self->state.pings += step; }};
}

using typed_tally = caf::typed_actor<caf::replies_to<ping_atom>::with<int>>;

/// The same as a typed actor.
typed_tally::behavior_type
typed_tally_impl(typed_tally::stateful_pointer<tally> self) {
  return {[self](ping_atom) { return ++self->state.pings; }};
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(scheduler_job, fixture)

// Spawned: the first activation is the job's.  A message to the idle
// actor queues the job again, and the actor handles it.
BOOST_AUTO_TEST_CASE(launch_and_messages_queue_the_job) {
  auto hdl = sys.spawn<counter>(std::ref(alive));
  auto* c = raw(hdl);
  run_the_job_of(c);
  BOOST_TEST(c->activations == 1);
  BOOST_TEST(!sched.has_job());
  caf::anon_send(hdl, ping_atom::value);
  caf::anon_send(hdl, ping_atom::value); // the actor is queued already
  run_the_job_of(c);
  BOOST_TEST(c->pings == 2);
  stop(hdl);
}

// A wake without a message (direct_poll.hpp's wake_without_message):
// whoever unblocks the idle mailbox schedules the job.
BOOST_AUTO_TEST_CASE(a_wake_queues_the_job) {
  auto hdl = sys.spawn<counter>(std::ref(alive));
  auto* c = raw(hdl);
  sched.run();
  BOOST_REQUIRE(c->mailbox().try_unblock());
  c->schedule_job(nullptr);
  run_the_job_of(c);
  BOOST_TEST(c->activations == 2);
  stop(hdl);
}

// Spawned lazily: nothing is queued until the first message.
BOOST_AUTO_TEST_CASE(a_lazy_actor_waits_for_its_first_message) {
  auto hdl = sys.spawn<counter, caf::lazy_init>(std::ref(alive));
  auto* c = raw(hdl);
  BOOST_TEST(!sched.has_job());
  caf::anon_send(hdl, ping_atom::value);
  run_the_job_of(c);
  BOOST_TEST(c->pings == 1);
  stop(hdl);
}

// A request to an actor that terminated gets an error answer, as from
// CAF's own enqueue, not silence.
BOOST_AUTO_TEST_CASE(a_request_to_a_terminated_actor_gets_an_error) {
  auto hdl = sys.spawn<counter>(std::ref(alive));
  sched.run();
  stop(hdl);
  bool answered = false;
  auto client = sys.spawn([&](caf::event_based_actor* self) {
    self->request(hdl, std::chrono::seconds(3600), ping_atom::value)
        .then([&](int) { BOOST_FAIL("a terminated actor answered"); },
              [&](caf::error& err) {
                answered = true;
                BOOST_TEST(static_cast<bool>(err));
              });
  });
  sched.run();
  BOOST_TEST(answered);
}

// The queued job holds a reference: dropping every handle while the job
// waits keeps the actor until the job ran, then it goes.
BOOST_AUTO_TEST_CASE(a_queued_job_keeps_its_actor_alive) {
  {
    auto hdl = sys.spawn<counter>(std::ref(alive));
    sched.run();
    caf::anon_send(hdl, ping_atom::value);
    caf::anon_send_exit(hdl, caf::exit_reason::user_shutdown);
  }
  BOOST_TEST(alive.load() == 1);
  BOOST_TEST(sched.has_job());
  sched.run();
  BOOST_TEST(alive.load() == 0);
}

// A function-based actor spawned with spawn_with_scheduler_job: its
// arguments reach the function, launch and messages queue its job, and
// requests are answered as from CAF's spawn.
BOOST_AUTO_TEST_CASE(a_function_based_actor_runs_through_its_job) {
  auto hdl = rdmactor::spawn_with_scheduler_job(sys, tally_impl, 5);
  static_assert(std::is_same<decltype(hdl), caf::actor>::value);
  run_the_job_of(scheduled(hdl));
  int answer = 0;
  auto client = sys.spawn([&](caf::event_based_actor* self) {
    self->request(hdl, std::chrono::seconds(3600), ping_atom::value)
        .then([&](int n) { answer = n; });
  });
  sched.run_once(); // the client: its request queues the job
  run_the_job_of(scheduled(hdl));
  sched.run();
  BOOST_TEST(answer == 5);
  stop(hdl);
}

// A typed, function-based actor: the same handle type as CAF's spawn.
BOOST_AUTO_TEST_CASE(a_typed_actor_runs_through_its_job) {
  auto hdl = rdmactor::spawn_with_scheduler_job(sys, typed_tally_impl);
  static_assert(std::is_same<decltype(hdl), typed_tally>::value);
  run_the_job_of(scheduled(hdl));
  caf::anon_send(hdl, ping_atom::value);
  run_the_job_of(scheduled(hdl));
  int answer = 0;
  auto client = sys.spawn([&](caf::event_based_actor* self) {
    self->request(hdl, std::chrono::seconds(3600), ping_atom::value)
        .then([&](int n) { answer = n; });
  });
  sched.run();
  BOOST_TEST(answer == 2);
  caf::anon_send_exit(hdl, caf::exit_reason::user_shutdown);
  sched.run();
}

// Two actor systems in one process (two nodes in a test): a sender that
// runs on a worker of the other system queues the job in the actor's own
// system, never on its own worker (which would run the actor there, and
// after the actor's system went, against a dead system).
BOOST_AUTO_TEST_CASE(a_sender_of_another_system_queues_the_job_at_home) {
  auto hdl = sys.spawn<counter>(std::ref(alive));
  auto* c = raw(hdl);
  run_the_job_of(c);
  test_config other_cfg;
  caf::actor_system other{other_cfg};
  auto& other_sched
      = dynamic_cast<caf::scheduler::test_coordinator&>(other.scheduler());
  auto sender = other.spawn([hdl](caf::event_based_actor* self) {
    self->send(hdl, ping_atom::value); // from a worker of `other`
  });
  other_sched.run();
  // The job waits in its own system's queue, not in the sender's.
  BOOST_TEST(other_sched.jobs.empty());
  run_the_job_of(c);
  BOOST_TEST(c->pings == 1);
  stop(hdl);
}

BOOST_AUTO_TEST_SUITE_END()
