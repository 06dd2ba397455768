#define BOOST_TEST_MODULE keepalive_timer
#include <boost/test/unit_test.hpp>

// The process's keepalive timer and its deadline queue
// (actors/connection/keepalive_timer.hpp).

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/after.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/connection/keepalive_timer.hpp"
#include "actors/core/node_liveness.hpp"
#include "rdmactor/detail/transport_atoms.hpp"

using namespace rdmactor;
using std::chrono::milliseconds;

namespace {

using queue = deadline_queue<int>;
const queue::time_point t0{milliseconds{1000}};

} // namespace

BOOST_AUTO_TEST_SUITE(deadline_queue_suite)

BOOST_AUTO_TEST_CASE(deadlines_round_up_to_the_tick_and_share_it) {
  queue q{milliseconds{10}};
  BOOST_TEST(q.add(1, t0 + milliseconds{1}));  // the earliest
  BOOST_TEST(!q.add(2, t0 + milliseconds{9})); // same tick
  BOOST_TEST(!q.add(3, t0 + milliseconds{25}));
  BOOST_TEST(q.add(4, t0)); // on a tick: earlier
  BOOST_TEST(q.size() == 4u);
  BOOST_TEST((q.next() == t0));
  std::vector<int> due;
  q.take_due(t0 + milliseconds{9}, due);
  BOOST_TEST((due == std::vector<int>{4}));
  // Both rounded to t0 + 10 ms, oldest first; nothing of the later tick.
  q.take_due(t0 + milliseconds{10}, due);
  BOOST_TEST((due == std::vector<int>{4, 1, 2}));
  BOOST_TEST((q.next() == t0 + milliseconds{30}));
  q.take_due(t0 + milliseconds{100}, due);
  BOOST_TEST((due == std::vector<int>{4, 1, 2, 3}));
  BOOST_TEST(q.size() == 0u);
  BOOST_TEST((q.next() == queue::time_point::max()));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(keepalive_timer_suite)

// A connection's deadlines are rounded to keepalive-ms / 50, from 10 to
// 100 ms: with the default 5 s, the connections due within 100 ms share a
// wake-up.
BOOST_AUTO_TEST_CASE(the_tick_follows_the_period_within_bounds) {
  using std::chrono::seconds;
  BOOST_TEST((keepalive_timer::tick_for(seconds{5}) == milliseconds{100}));
  BOOST_TEST((keepalive_timer::tick_for(seconds{60}) == milliseconds{100}));
  BOOST_TEST(
      (keepalive_timer::tick_for(milliseconds{2000}) == milliseconds{40}));
  BOOST_TEST(
      (keepalive_timer::tick_for(milliseconds{100}) == milliseconds{10}));
  BOOST_TEST((keepalive_timer::tick_for({}) == milliseconds{10}));
  auto at = queue::round_up(t0 + milliseconds{1}, milliseconds{100});
  BOOST_TEST((at == queue::time_point{milliseconds{1100}}));
}

// The agent's keepalive check arrives as `tick_atom` once its deadline
// passed; an agent that went meanwhile is dropped, not kept alive.
BOOST_AUTO_TEST_CASE(a_due_agent_gets_a_tick_and_a_gone_one_nothing) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto& timer = keepalive_timer::instance();
  auto now = keepalive_timer::clock_type::now();
  timer.schedule(caf::actor_cast<caf::weak_actor_ptr>(self),
                 now + milliseconds{30});
  bool ticked = false;
  self->receive([&](transport::tick_atom) { ticked = true; },
                caf::after(std::chrono::seconds(5)) >> [] {});
  BOOST_TEST(ticked);
  BOOST_TEST((keepalive_timer::clock_type::now() >= now + milliseconds{30}));
  // Held weakly: an actor nobody holds is destroyed while it waits.
  caf::weak_actor_ptr weak;
  {
    auto gone = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
      return {[](transport::tick_atom) {}};
    });
    weak = caf::actor_cast<caf::weak_actor_ptr>(gone);
    timer.schedule(weak, keepalive_timer::clock_type::now()
                             + std::chrono::seconds(60));
  } // the last handle goes
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (weak.lock() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds{10});
  BOOST_TEST(!weak.lock());
  BOOST_TEST(timer.waiting() >= 1u); // still queued, harmlessly
}

// A check due while the peer node was heard from since it was armed would
// find nothing to do: the timer waits `silence` after the last frame
// instead of waking the agent, and wakes it once the node went silent that
// long.
BOOST_AUTO_TEST_CASE(a_peer_heard_from_since_postpones_the_tick) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  using clock_type = keepalive_timer::clock_type;
  auto group = std::make_shared<node_liveness>();
  group->heard(clock_type::now());
  auto silence = milliseconds{150};
  keepalive_timer::instance().schedule(
      caf::actor_cast<caf::weak_actor_ptr>(self),
      clock_type::now() + milliseconds{20}, group, silence, silence);
  // Frames keep coming for 300 ms: no tick.
  auto until = clock_type::now() + milliseconds{300};
  bool early = false;
  while (clock_type::now() < until) {
    group->heard(clock_type::now());
    self->receive([&](transport::tick_atom) { early = true; },
                  caf::after(milliseconds{20}) >> [] {});
  }
  BOOST_TEST(!early);
  // Silence: the tick comes `silence` after the last frame.
  auto last = group->last_heard();
  bool ticked = false;
  self->receive([&](transport::tick_atom) { ticked = true; },
                caf::after(std::chrono::seconds(5)) >> [] {});
  BOOST_TEST(ticked);
  BOOST_TEST((clock_type::now() >= last + silence));
}

// Connections to one silent peer node: the timer wakes one of them (to
// ping), not all; the others wait for that Ping's answer.
BOOST_AUTO_TEST_CASE(of_the_connections_to_a_silent_node_one_is_woken) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  using clock_type = keepalive_timer::clock_type;
  auto group = std::make_shared<node_liveness>();
  auto silence = milliseconds{100};
  group->heard(clock_type::now() - silence); // silent already
  std::vector<std::unique_ptr<caf::scoped_actor>> conns;
  for (int i = 0; i < 5; ++i) {
    conns.emplace_back(std::make_unique<caf::scoped_actor>(sys));
    keepalive_timer::instance().schedule(
        caf::actor_cast<caf::weak_actor_ptr>(*conns.back()), clock_type::now(),
        group, silence, std::chrono::seconds(10));
  }
  int ticked = 0;
  for (auto& c : conns)
    (*c)->receive([&](transport::tick_atom) { ++ticked; },
                  caf::after(milliseconds{300}) >> [] {});
  BOOST_TEST(ticked == 1);
}

BOOST_AUTO_TEST_SUITE_END()
