// Backpressure of remote-actor messages (EXT_ACTOR_FLOW): a fast sender
// and a slow receiving actor.  Part of remote_actors_test (soft, and
// verbs through test/verbs/CMakeLists.txt).

#include <boost/test/unit_test.hpp>

#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/skip.hpp>

#include "actors/remote/actor_codec.hpp"
#include "actors/remote/actor_flow.hpp"
#include "test/actors/remote_actors_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

std::chrono::seconds flow_wait_time() {
  return std::chrono::seconds(30 * timeout_scale());
}

/// A slow actor: it leaves every int32 in its mailbox (skips it) until it
/// gets `open`, then takes them in order; `seen` answers what it took.
caf::behavior slow_sink(caf::event_based_actor*) {
  auto seen = std::make_shared<std::vector<int32_t>>();
  auto open = std::make_shared<bool>(false);
  return {
      [=](int32_t seq) -> caf::result<void> {
        if (!*open)
          return caf::skip();
        seen->push_back(seq);
        return caf::unit;
      },
      [](int32_t a, int32_t b) { return a + b; },
      [=](caf::atom_value what) -> std::vector<int32_t> {
        if (what == caf::atom("open"))
          *open = true;
        return *seen;
      },
  };
}

agent_stats stats_of(caf::actor_system& sys, const connection_actor& conn) {
  auto s = call<agent_stats>(sys, conn, stats_atom::value);
  BOOST_REQUIRE_MESSAGE(s, render(s));
  return *s;
}

/// Waits until `sink` took `n` messages; returns them.
std::vector<int32_t> taken(caf::actor_system& sys, const caf::actor& sink,
                           size_t n) {
  std::vector<int32_t> last;
  bool done = eventually(
      [&] {
        auto v = call<std::vector<int32_t>>(sys, sink, caf::atom("seen"));
        if (v)
          last = *v;
        return v && v->size() >= n;
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(flow_wait_time()));
  BOOST_TEST(done, "the slow actor took " << last.size() << " of " << n);
  return last;
}

std::vector<int32_t> iota_of(int32_t n) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n; ++i)
    out.push_back(i);
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(window_rules_give_a_blocked_sender_credit) {
  // Messages: the window is a hard count.
  BOOST_TEST(actor_window_allows(7, 0, 1, 8, 100));
  BOOST_TEST(!actor_window_allows(8, 0, 1, 8, 100));
  // Bytes: within the window, or below half of it used.
  BOOST_TEST(actor_window_allows(1, 40, 60, 8, 100));
  BOOST_TEST(!actor_window_allows(1, 50, 51, 8, 100));
  BOOST_TEST(actor_window_allows(1, 49, 1000, 8, 100));
  BOOST_TEST(actor_window_allows(0, 0, 1000, 8, 1));
  // Hostile acknowledgements change nothing.
  actor_outflow out;
  out.active = true;
  out.window_messages = 8;
  out.window_bytes = 100;
  out.sent_messages = 3;
  out.sent_bytes = 30;
  BOOST_TEST(static_cast<bool>(out.ack(4, 30)));
  BOOST_TEST(static_cast<bool>(out.ack(3, 31)));
  BOOST_TEST(!static_cast<bool>(out.ack(2, 20)));
  BOOST_TEST(static_cast<bool>(out.ack(1, 10)));
  BOOST_TEST(out.acked_messages == 2u);
  BOOST_TEST(!static_cast<bool>(out.ack(3, 30)));
  // The receiver: over the window is refused; credit is due at half of it.
  actor_inflow in{4, 1000};
  int wakeups = 0;
  in.set_wakeup([&] { ++wakeups; });
  in.set_flow(true);
  for (int i = 0; i < 4; ++i)
    BOOST_TEST(!static_cast<bool>(in.admit(10)));
  BOOST_TEST(static_cast<bool>(in.admit(10)));
  in.consumed(10);
  BOOST_TEST(wakeups == 0);
  in.consumed(10);
  BOOST_TEST(wakeups == 1);
  in.consumed(10); // a wakeup is pending already
  BOOST_TEST(wakeups == 1);
  uint64_t m = 0;
  uint64_t b = 0;
  BOOST_REQUIRE(in.take_ack(m, b));
  BOOST_TEST(m == 3u);
  BOOST_TEST(b == 30u);
  BOOST_TEST(!in.take_ack(m, b));
  BOOST_TEST(in.buffered() == 1u);
  BOOST_TEST(in.buffered_max() == 4u);
}

BOOST_AUTO_TEST_CASE(a_slow_actor_holds_a_fast_sender_to_the_window) {
  constexpr int32_t window = 8;
  constexpr int32_t n = 100;
  remote_system probe{true};
  auto one = serialize_message(probe.sys, caf::make_message(int32_t{0}));
  BOOST_REQUIRE(one);
  auto client_opts = test_options();
  // Room for exactly the messages beyond the window.
  client_opts.actor_send_queue_bytes = (n - window) * one->size();
  auto server_opts = test_options();
  server_opts.actor_window_messages = window;
  remote_nodes t{false, client_opts, server_opts};
  auto sink = t.server_sys.spawn(slow_sink);
  t.publish("slow", sink);
  auto proxy = t.lookup("slow");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  caf::scoped_actor self{t.sys};
  for (int32_t i = 0; i < n; ++i)
    self->send(*proxy, i);
  // The proxy forwards on the sending thread: the window went, the rest
  // waits on the sender's side (the slow actor returned no credit).
  auto c = stats_of(t.sys, t.client_conn);
  BOOST_TEST(c.actor_in_flight == uint64_t{window});
  BOOST_TEST(c.actor_queued == uint64_t{n - window});
  BOOST_TEST(c.actor_queued_bytes == (n - window) * one->size());
  // The queue is full: a request fails at once, naming the option.
  bool refused = false;
  self->request(*proxy, flow_wait_time(), int32_t{-1})
      .receive([&](int32_t) { BOOST_FAIL("the request went"); },
               [&](caf::error& err) {
                 refused = true;
                 BOOST_TEST(code_of(err) == errc::quota_exceeded, render(err));
                 BOOST_TEST(what_of(err).find("actor-send-queue-bytes")
                                != std::string::npos,
                            what_of(err));
               });
  BOOST_TEST(refused);
  self->send(*proxy, int32_t{-2}); // dropped (logged)
  c = stats_of(t.sys, t.client_conn);
  BOOST_TEST(c.actor_send_refused == 2u);
  BOOST_TEST(c.actor_queued == uint64_t{n - window});
  // The receiver holds the window in the actor's mailbox, no more.
  BOOST_TEST(eventually([&] {
    return stats_of(t.server_sys, t.server_conn).actor_buffered
           == uint64_t{window};
  }));
  // The actor catches up: everything arrives, in order.
  caf::anon_send(sink, caf::atom("open"));
  auto got = taken(t.server_sys, sink, n);
  BOOST_TEST(got == iota_of(n), "out of order or missing");
  auto s = stats_of(t.server_sys, t.server_conn);
  BOOST_TEST(s.actor_buffered_max <= uint64_t{window});
  BOOST_TEST(s.actor_acks_sent > 0u);
  BOOST_TEST(eventually([&] {
    auto x = stats_of(t.sys, t.client_conn);
    return x.actor_queued == 0 && x.actor_queued_bytes == 0;
  }));
  BOOST_TEST(stats_of(t.sys, t.client_conn).actor_acks_received > 0u);
  // Requests and their responses still work.
  auto r = call<int32_t>(t.sys, *proxy, int32_t{40}, int32_t{2});
  BOOST_REQUIRE_MESSAGE(r, render(r));
  BOOST_TEST(*r == 42);
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(chunked_messages_keep_their_order_in_a_small_window) {
  auto o = test_options();
  o.actor_window_messages = 2;
  o.actor_window_bytes = 3 * o.max_message_len_bytes;
  remote_nodes t{false, o, o};
  auto checker = t.server_sys.spawn([](caf::event_based_actor*) {
    auto next = std::make_shared<int32_t>(0);
    auto ok = std::make_shared<bool>(true);
    return caf::behavior{
        [=](int32_t seq, const byte_vector& v) {
          if (seq != *next || v.size() != static_cast<size_t>(seq) * 977
              || (!v.empty() && v.back() != static_cast<uint8_t>(seq)))
            *ok = false;
          ++*next;
        },
        [=](caf::atom_value) { return *ok ? *next : -1; },
    };
  });
  t.publish("checker", checker);
  auto proxy = t.lookup("checker");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  caf::scoped_actor self{t.sys};
  constexpr int32_t n = 40; // up to ~38 KiB: several chunks each
  for (int32_t i = 0; i < n; ++i)
    self->send(
        *proxy, i,
        byte_vector(static_cast<size_t>(i) * 977, static_cast<uint8_t>(i)));
  int32_t seen = 0;
  BOOST_TEST(eventually([&] {
    auto r = call<int32_t>(t.sys, *proxy, caf::atom("count"));
    seen = r ? *r : -2;
    return seen == n || seen == -1;
  }));
  BOOST_TEST(seen == n);
  BOOST_TEST(stats_of(t.server_sys, t.server_conn).actor_buffered_max <= 2u);
  caf::anon_send_exit(checker, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_peer_without_flow_control_still_works_within_limits) {
  constexpr int32_t window = 8;
  auto client_opts = test_options();
  client_opts.actor_flow = false; // as a peer of before EXT_ACTOR_FLOW
  auto server_opts = test_options();
  server_opts.actor_window_messages = window;
  remote_nodes t{false, client_opts, server_opts};
  auto sink = t.server_sys.spawn(slow_sink);
  t.publish("slow", sink);
  auto proxy = t.lookup("slow");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  caf::scoped_actor self{t.sys};
  for (int32_t i = 0; i < window; ++i)
    self->send(*proxy, i);
  BOOST_TEST(eventually([&] {
    return stats_of(t.server_sys, t.server_conn).actor_buffered
           == uint64_t{window};
  }));
  caf::anon_send(sink, caf::atom("open"));
  auto got = taken(t.server_sys, sink, window);
  BOOST_TEST(got == iota_of(window));
  auto s = stats_of(t.server_sys, t.server_conn);
  BOOST_TEST(s.actor_acks_sent == 0u);
  BOOST_TEST(stats_of(t.sys, t.client_conn).actor_queued == 0u);
  // Over the window in a slow actor's mailbox: the peer is disconnected.
  auto sink2 = t.server_sys.spawn(slow_sink);
  t.publish("slow2", sink2);
  auto proxy2 = t.lookup("slow2");
  BOOST_REQUIRE_MESSAGE(proxy2, render(proxy2));
  self->monitor(*proxy2);
  for (int32_t i = 0; i <= window; ++i)
    self->send(*proxy2, i);
  bool down = false;
  self->receive(
      [&](caf::down_msg& dm) {
        down = true;
        BOOST_TEST_MESSAGE("proxy down: " << render(dm.reason));
      },
      caf::after(flow_wait_time()) >> [] { BOOST_FAIL("no disconnect"); });
  BOOST_TEST(down);
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(sink2, caf::exit_reason::user_shutdown);
}
