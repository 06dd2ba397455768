#define BOOST_TEST_MODULE link_runner
#include <boost/test/unit_test.hpp>

// The runner of the actors that drive a link (scheduling/link_runner.hpp):
// a burst of messages that post leaves in one doorbell, and the CQ's
// notification reaches the actor without a message.  A probe actor drives
// a link over the counting fake queue pair of test/support/fake_fabric.hpp.

#include <chrono>
#include <condition_variable>
#include <mutex>

#include <caf/all.hpp>

#include "common/tuning.hpp"
#include "scheduling/link_runner.hpp"
#include "test/support/fake_fabric.hpp"

using namespace rdmactor;
using namespace rdmactor::transport;
using rdmactor::fuzz::counting_queue_pair;
using rdmactor::fuzz::fake_device;
using rdmactor::fuzz::fake_link;

namespace {

using burst_atom = caf::atom_constant<caf::atom("burst")>;
using one_atom = caf::atom_constant<caf::atom("one")>;
using report_atom = caf::atom_constant<caf::atom("report")>;
using done_atom = caf::atom_constant<caf::atom("done")>;

/// What the probe saw, shared with the test's thread.
struct journal {
  std::mutex mtx;
  std::condition_variable cv;
  size_t side_work_notified = 0;
  size_t side_work_polls = 0;

  size_t notified() {
    std::lock_guard<std::mutex> guard{mtx};
    return side_work_notified;
  }

  template <class Pred>
  bool wait(Pred pred) {
    std::unique_lock<std::mutex> guard{mtx};
    return cv.wait_for(guard, std::chrono::seconds(5), pred);
  }
};

/// Keeps the CQ's notification for the test to fire (as the fabric's
/// thread would).
class notifying_queue_pair : public counting_queue_pair {
public:
  using counting_queue_pair::counting_queue_pair;

  bool set_cq_notify(std::function<void()> fn) override {
    notify = std::move(fn);
    return true;
  }

  std::function<void()> notify;
};

struct probe_state : link_observer {
  link_driver driver;
  bool yield_now = false;
  void on_done(uint64_t, caf::expected<uint64_t>) override {}
  void on_message(local_mr) override {}
  void on_down(const caf::error&) override {}
};

/// Drives `dl` in event mode: `(burst_atom, n)` queues `n` messages that
/// post one SEND each and answers, from a last message behind them, the
/// doorbells rung since the burst began and the SENDs posted while the
/// doorbell was held.
class probe
    : public link_runner<probe, caf::actor, caf::stateful_actor<probe_state>> {
public:
  using super
      = link_runner<probe, caf::actor, caf::stateful_actor<probe_state>>;

  probe(caf::actor_config& cfg, driven_link* dl, counting_queue_pair* qp,
        journal* log)
      : super(cfg), dl_(dl), qp_(qp), log_(log) {}

  caf::behavior make_behavior() override {
    state.driver.init(polling{completion_mode::event, 0}, &polls().wanted);
    state.driver.start(*dl_, state, caf::actor_cast<caf::weak_actor_ptr>(this),
                       direct_wake_for(home_system(), this));
    return {
        [this](burst_atom, uint32_t n) {
          for (uint32_t i = 0; i < n; ++i)
            send(this, one_atom::value);
          send(this, done_atom::value);
          rings_at_burst_ = qp_->rings;
          burst_ = make_response_promise();
          return burst_;
        },
        [this](done_atom) {
          burst_.deliver(qp_->rings - rings_at_burst_, qp_->posted_while_held);
        },
        [this](one_atom) {
          state.driver.path().submit(op_kind::send, {1, 2, 3, 4}, local_mr{},
                                     mr_token{}, 0);
          state.driver.posted();
        },
        [this](report_atom) {
          return caf::make_message(qp_->rings, qp_->posted_while_held);
        },
        [this](poll_atom) { state.driver.drain(); },
        [this](cq_event_atom) { state.driver.notified(); },
    };
  }

  void side_work(const due_work& w) {
    if (w.notified)
      state.driver.notified();
    else if (w.poll)
      state.driver.drain();
    std::lock_guard<std::mutex> guard{log_->mtx};
    if (w.notified)
      ++log_->side_work_notified;
    if (w.poll)
      ++log_->side_work_polls;
    log_->cv.notify_all();
  }

private:
  caf::response_promise burst_;
  size_t rings_at_burst_ = 0;
  driven_link* dl_;
  counting_queue_pair* qp_;
  journal* log_;
};

struct fixture {
  fixture() {
    conn_params cp;
    cp.recv_depth = 64;
    cp.max_message_len_bytes = 4096;
    peer = std::make_shared<fake_link>(dev->registry, cp);
    qp = std::make_shared<notifying_queue_pair>(peer);
    auto opened = transport::link::open(dev, qp);
    BOOST_REQUIRE(opened);
    dl.path = std::shared_ptr<transport::link>{std::move(*opened)};
    // A bounded max-throughput: the runner takes notifications directly.
    cfg.set("scheduler.max-threads", 1);
    cfg.set("scheduler.max-throughput", 100);
  }

  std::shared_ptr<fake_device> dev = std::make_shared<fake_device>();
  std::shared_ptr<fake_link> peer;
  std::shared_ptr<notifying_queue_pair> qp;
  driven_link dl;
  journal log;
  caf::actor_system_config cfg;
};

/// Waits until `p` answered a report: its first activation (the poll and
/// the arming) has run.
void settle(caf::scoped_actor& self, const caf::actor& p) {
  self->request(p, caf::infinite, report_atom::value)
      .receive([](size_t, size_t) {}, [](caf::error&) {});
}

} // namespace

BOOST_AUTO_TEST_CASE(a_burst_of_posting_messages_rings_the_doorbell_once) {
  fixture f;
  caf::actor_system sys{f.cfg};
  auto p = sys.spawn<probe>(&f.dl, f.qp.get(), &f.log);
  caf::scoped_actor self{sys};
  settle(self, p);
  const uint32_t n = tuning::doorbell_batch - 4;
  static_assert(n > 1 && n < tuning::doorbell_batch);
  size_t rings = 0;
  size_t held = 0;
  self->request(p, caf::infinite, burst_atom::value, n)
      .receive(
          [&](size_t r, size_t h) {
            rings = r;
            held = h;
          },
          [](caf::error&) { BOOST_FAIL("no answer to the burst"); });
  // Through the burst's last message, every SEND was posted with the
  // doorbell held, and it was not rung: the burst leaves in one doorbell
  // once the mailbox runs empty.
  BOOST_TEST(held == n);
  BOOST_TEST(rings == 0u);
  caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(the_cq_notification_arrives_without_a_message) {
  fixture f;
  caf::actor_system sys{f.cfg};
  auto p = sys.spawn<probe>(&f.dl, f.qp.get(), &f.log);
  caf::scoped_actor self{sys};
  settle(self, p);
  auto before = f.log.notified();
  // The peer sends, and the armed CQ notifies the runner on this thread.
  std::vector<uint8_t> data(16, 0xab);
  BOOST_REQUIRE(f.peer->deliver(data.data(), data.size(), 0));
  BOOST_REQUIRE(f.qp->notify);
  f.qp->notify();
  BOOST_TEST(f.log.wait([&] { return f.log.side_work_notified > before; }));
  caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
}
