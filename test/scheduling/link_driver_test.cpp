#define BOOST_TEST_MODULE link_driver
#include <boost/test/unit_test.hpp>

// The completion logic of a link's owner (scheduling/link_driver.hpp)
// without actors: a driver on a link over the fake queue pair of
// test/support/fake_fabric.hpp; the test plays the peer and the owner's
// `resume` (it reads the poll flag and calls `drain`).

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "common/tuning.hpp"
#include "scheduling/contention.hpp"
#include "scheduling/link_driver.hpp"
#include "test/support/fake_fabric.hpp"

using namespace rdmactor;
using namespace rdmactor::transport;
using rdmactor::fuzz::counting_queue_pair;
using rdmactor::fuzz::fake_device;
using rdmactor::fuzz::fake_link;
using rdmactor::fuzz::fake_queue_pair;

namespace {

/// Records what the link reports.
struct recorder : link_observer {
  void on_done(uint64_t cookie, caf::expected<uint64_t>) override {
    dones.push_back(cookie);
  }
  void on_message(local_mr) override {
    ++messages;
    if (quiet_on != nullptr)
      quiet_on->mark_quiet(); // as the agent does for a Ping or Pong
  }
  void on_down(const caf::error&) override {
    ++downs;
  }
  std::vector<uint64_t> dones;
  size_t messages = 0;
  /// Set: every message is upkeep (`link::mark_quiet`).
  transport::link* quiet_on = nullptr;
  size_t downs = 0;
};

struct fixture {
  fixture() {
    // The machine's load must not decide these tests: no contention, unless
    // a test says so.
    contention_monitor::instance().force(0);
    conn_params cp;
    cp.recv_depth = 8;
    cp.max_message_len_bytes = 4096;
    peer = std::make_shared<fake_link>(dev->registry, cp);
    qp = std::make_shared<counting_queue_pair>(peer);
    auto opened = transport::link::open(dev, qp);
    BOOST_REQUIRE(opened);
    dl = std::make_unique<driven_link>();
    dl->path = std::shared_ptr<transport::link>{std::move(*opened)};
  }

  /// A driver in `mode` with its own poll flag.
  void start(completion_mode mode) {
    driver.init(polling{mode, 1000}, &wanted);
    driver.start(*dl, rec, caf::weak_actor_ptr{});
  }

  /// A SEND from the peer (16 bytes).
  bool deliver() {
    std::vector<uint8_t> data(16, 0xab);
    return peer->deliver(data.data(), data.size(), 0);
  }

  /// Takes the poll flag, as the owner's `resume` does.
  bool take_poll() {
    return wanted.exchange(false);
  }

  std::shared_ptr<fake_device> dev = std::make_shared<fake_device>();
  std::shared_ptr<fake_link> peer;
  std::shared_ptr<counting_queue_pair> qp;
  std::unique_ptr<driven_link> dl;
  std::atomic<bool> wanted{false};
  link_driver driver;
  recorder rec;

  ~fixture() {
    contention_monitor::instance().force(-1);
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(start_arms_the_cq_and_asks_for_a_poll) {
  fixture f;
  f.start(completion_mode::adaptive);
  BOOST_TEST(f.driver.driving());
  BOOST_TEST(!f.driver.down());
  BOOST_TEST(f.qp->arms.size() == 1u);
  // What came before the arming did not notify: the first poll finds it.
  BOOST_TEST(f.take_poll());
}

// A new link is looked at once (what came before the arming), then armed:
// it starts no polling tail of its own, and neither does a quiet post in
// flight (the agent's Hello), so that thousands of connections opened at
// once do not each spin on their socket.  Traffic polls as before.
BOOST_AUTO_TEST_CASE(a_new_link_looks_once_then_arms) {
  fixture f;
  f.start(completion_mode::adaptive);
  f.driver.path().submit(op_kind::send, std::vector<uint8_t>(8, 1), local_mr{},
                         mr_token{}, 0, std::nullopt, true);
  f.driver.posted(true);
  BOOST_REQUIRE(f.take_poll());
  f.driver.drain();
  BOOST_TEST(!f.take_poll());
  BOOST_TEST((f.driver.path().armed() != transport::link::armed_for::none));
  // The first traffic polls.
  f.driver.path().submit(op_kind::send, std::vector<uint8_t>(8, 1), local_mr{},
                         mr_token{}, 0);
  f.driver.posted();
  BOOST_TEST(f.take_poll());
}

BOOST_AUTO_TEST_CASE(busy_mode_never_arms) {
  fixture f;
  f.start(completion_mode::busy);
  BOOST_TEST(f.qp->arms.empty());
  for (int i = 0; i < 100; ++i) {
    BOOST_TEST(f.take_poll());
    f.driver.drain();
  }
  BOOST_TEST(f.qp->arms.empty());
}

BOOST_AUTO_TEST_CASE(drain_hands_messages_to_the_observer) {
  fixture f;
  f.start(completion_mode::adaptive);
  BOOST_TEST(f.deliver());
  BOOST_TEST(f.deliver());
  BOOST_TEST(f.take_poll());
  BOOST_TEST(f.driver.drain() == 2u);
  BOOST_TEST(f.rec.messages == 2u);
  // Adaptive: polling goes on after a completion.
  BOOST_TEST(f.take_poll());
}

BOOST_AUTO_TEST_CASE(a_post_starts_polling_except_in_event_mode) {
  for (auto mode : {completion_mode::adaptive, completion_mode::event}) {
    fixture f;
    f.start(mode);
    f.take_poll();
    f.driver.path().submit(op_kind::send, std::vector<uint8_t>(8, 1),
                           local_mr{}, mr_token{}, 0);
    f.driver.posted();
    BOOST_TEST(f.take_poll() == (mode != completion_mode::event));
  }
}

BOOST_AUTO_TEST_CASE(event_mode_arms_after_a_drain_instead_of_polling_again) {
  fixture f;
  f.start(completion_mode::event);
  BOOST_TEST(f.take_poll());
  BOOST_TEST(f.deliver());
  f.driver.notified();
  BOOST_TEST(f.rec.messages == 1u);
  BOOST_TEST(!f.take_poll());
  BOOST_TEST((f.driver.path().armed() != transport::link::armed_for::none));
}

BOOST_AUTO_TEST_CASE(a_request_in_event_mode_widens_the_arming) {
  fixture f;
  f.start(completion_mode::event);
  f.driver.drain();
  // Nothing waits for a send-queue completion: armed for receives only.
  BOOST_TEST((f.driver.path().armed() == transport::link::armed_for::receives));
  f.driver.path().submit(op_kind::send, std::vector<uint8_t>(8, 1), local_mr{},
                         mr_token{}, 7);
  f.driver.requested();
  // The fake completes at once; the poll after the arming found it.
  BOOST_TEST(f.rec.dones == std::vector<uint64_t>{7});
  BOOST_TEST((f.qp->arms.back() == cq_events::all));
}

// Held until the end of the activation, the request would reach the
// device after the poll that follows the arming: its completion would
// always need the notification (a thread hand-off).
BOOST_AUTO_TEST_CASE(a_request_in_event_mode_goes_to_the_device_before_arming) {
  fixture f;
  f.start(completion_mode::event);
  f.driver.drain();
  f.driver.path().hold_posts(); // as the owner does during an activation
  auto rings = f.qp->rings;
  f.driver.path().submit(op_kind::send, std::vector<uint8_t>(8, 1), local_mr{},
                         mr_token{}, 7);
  BOOST_TEST(f.qp->rings == rings); // held
  f.driver.requested();
  BOOST_TEST((f.qp->arms.back() == cq_events::all));
  BOOST_TEST(f.qp->rings_at_arm.back() == rings + 1); // rung, then armed
  BOOST_TEST(f.driver.path().posts_held());           // and held again
  f.driver.path().flush_posts();
}

BOOST_AUTO_TEST_CASE(the_next_driver_gets_what_came_between_two_drivers) {
  // The agent drives a lent link, then the transport that owns it.
  fixture f;
  f.start(completion_mode::event);
  f.driver.drain();
  auto arms_before = f.qp->arms.size();
  f.driver.stop();
  f.driver.stop(); // once is enough
  BOOST_TEST(!f.driver.driving());
  BOOST_TEST(f.driver.down()); // nothing driven: nothing to do
  BOOST_TEST(f.driver.drain() == 0u);
  BOOST_TEST(f.deliver()); // while nobody drives the link
  recorder next;
  std::atomic<bool> next_wanted{false};
  link_driver second;
  second.init(polling{completion_mode::event, 0}, &next_wanted);
  second.start(*f.dl, next, caf::weak_actor_ptr{});
  // It arms again (the old arming may have woken the old owner) and looks.
  BOOST_TEST(f.qp->arms.size() == arms_before + 1);
  BOOST_TEST(next_wanted.exchange(false));
  second.drain();
  BOOST_TEST(next.messages == 1u);
  BOOST_TEST(f.rec.messages == 0u);
}

BOOST_AUTO_TEST_CASE(a_down_link_asks_for_no_more_polls) {
  fixture f;
  f.start(completion_mode::busy);
  f.take_poll();
  f.driver.path().fail(caf::make_error(caf::sec::runtime_error));
  BOOST_TEST(f.rec.downs == 1u);
  BOOST_TEST(f.driver.down());
  f.driver.posted();
  f.driver.schedule_poll();
  BOOST_TEST(!f.take_poll());
}

/// Pauses the poll at its first message.
struct pausing_recorder : recorder {
  transport::link* path = nullptr;
  void on_message(local_mr msg) override {
    recorder::on_message(std::move(msg));
    path->pause();
  }
};

BOOST_AUTO_TEST_CASE(a_paused_poll_keeps_the_rest_for_the_next_poll) {
  fixture f;
  pausing_recorder rec;
  rec.path = f.dl->path.get();
  f.driver.init(polling{completion_mode::event, 0}, &f.wanted);
  f.driver.start(*f.dl, rec, caf::weak_actor_ptr{});
  f.take_poll();
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(f.deliver());
  auto arms = f.qp->arms.size();
  // Each poll ends after one message, asks for the next poll and does not
  // arm (the rest waits in the link, not in the CQ).
  for (size_t i = 1; i <= 3; ++i) {
    f.driver.drain();
    BOOST_TEST(rec.messages == i);
    BOOST_TEST(f.take_poll());
    BOOST_TEST(f.qp->arms.size() == arms);
  }
  // Nothing left: event mode arms again.
  f.driver.drain();
  BOOST_TEST(rec.messages == 3u);
  BOOST_TEST(!f.take_poll());
}

BOOST_AUTO_TEST_CASE(stopping_leaves_the_link_with_nothing_held) {
  fixture f;
  f.start(completion_mode::adaptive);
  f.driver.path().hold_posts();
  auto rings = f.qp->rings;
  f.driver.stop();
  BOOST_TEST(f.qp->rings == rings + 1);
  BOOST_TEST(!f.dl->path->posts_held());
}

BOOST_AUTO_TEST_CASE(contended_cores_make_adaptive_polling_arm_as_events_do) {
  fixture f;
  f.start(completion_mode::adaptive);
  f.take_poll();
  BOOST_TEST(f.deliver());
  f.driver.drain();
  BOOST_TEST(f.take_poll()); // polling: quiet machine
  // Other programs take the cores: at the next look the owner arms.
  contention_monitor::instance().force(1);
  for (uint32_t i = 0; i < tuning::polls_per_clock_read; ++i) {
    f.driver.drain();
    if (!f.take_poll())
      break;
  }
  BOOST_TEST(f.driver.contended());
  BOOST_TEST(!f.take_poll());
  BOOST_TEST((f.driver.path().armed() != transport::link::armed_for::none));
  // A post does not start polling either, even with work in flight.
  f.driver.path().submit(op_kind::send, std::vector<uint8_t>(8, 1), local_mr{},
                         mr_token{}, 0);
  f.driver.posted();
  BOOST_TEST(!f.take_poll());
  // Completions come by notification; the cores free up: polling again.
  contention_monitor::instance().force(0);
  bool polling = false;
  for (uint32_t i = 0; i <= tuning::polls_per_clock_read && !polling; ++i) {
    BOOST_TEST(f.deliver());
    f.driver.notified();
    polling = f.take_poll();
  }
  BOOST_TEST(polling);
  BOOST_TEST(!f.driver.contended());
}

BOOST_AUTO_TEST_CASE(busy_mode_spins_whatever_the_contention) {
  fixture f;
  contention_monitor::instance().force(1);
  f.start(completion_mode::busy);
  for (uint32_t i = 0; i < 4 * tuning::polls_per_clock_read; ++i) {
    BOOST_TEST(f.take_poll());
    f.driver.drain();
  }
  BOOST_TEST(f.qp->arms.empty());
}

BOOST_AUTO_TEST_CASE(a_post_that_must_wait_widens_an_arming_for_receives) {
  fixture f;
  f.start(completion_mode::event);
  f.driver.drain();
  BOOST_TEST((f.driver.path().armed() == transport::link::armed_for::receives));
  // More posts than the peer granted receives: the rest waits in the link
  // for credits or send-queue entries, which only completions bring.
  for (int i = 0; i < 64 && f.driver.path().queued() == 0; ++i) {
    f.driver.path().submit(op_kind::send, std::vector<uint8_t>(8, 1),
                           local_mr{}, mr_token{}, 0);
    f.driver.posted();
  }
  BOOST_REQUIRE(f.driver.path().queued() > 0);
  BOOST_TEST((f.driver.path().armed() == transport::link::armed_for::all));
  BOOST_TEST((f.qp->arms.back() == cq_events::all));
}

// An idle connection's keepalive (a Ping or Pong posted with
// `link::submit`'s `quiet`, one received marked with `link::mark_quiet`)
// starts no adaptive polling tail: the owner arms again within one clock
// reading.  Traffic does start it.
BOOST_AUTO_TEST_CASE(keepalive_upkeep_starts_no_polling_tail) {
  fixture f;
  f.start(completion_mode::adaptive);
  // Idle past the polling budget (1 ms): the driver arms.
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  for (uint32_t i = 0; i <= tuning::polls_per_clock_read && f.take_poll(); ++i)
    f.driver.drain();
  BOOST_REQUIRE(!f.take_poll());
  // A quiet post asks for no poll.
  f.driver.path().submit(op_kind::send, std::vector<uint8_t>(8, 1), local_mr{},
                         mr_token{}, 0, std::nullopt, true);
  f.driver.posted(true);
  BOOST_TEST(!f.take_poll());
  // A quiet message (and the quiet send's completion) count as nothing:
  // the poll that handles them reports 0, and the driver arms again
  // within one clock reading.
  f.rec.quiet_on = &f.driver.path();
  BOOST_TEST(f.deliver());
  BOOST_TEST(f.driver.notified() == 0u);
  BOOST_TEST(f.rec.messages == 1u);
  uint32_t polls = 0;
  while (f.take_poll() && polls <= tuning::polls_per_clock_read) {
    f.driver.drain();
    ++polls;
  }
  BOOST_TEST(polls <= tuning::polls_per_clock_read);
  BOOST_TEST(!f.take_poll());
  // Traffic starts the tail: after a message that is not upkeep the
  // driver still polls at the next clock reading.
  f.rec.quiet_on = nullptr;
  BOOST_TEST(f.deliver());
  BOOST_TEST(f.driver.notified() == 1u);
  for (uint32_t i = 0; i < tuning::polls_per_clock_read; ++i) {
    BOOST_REQUIRE(f.take_poll());
    f.driver.drain();
  }
  BOOST_TEST(f.take_poll());
}
