#include <boost/test/unit_test.hpp>

// The suite `flow`: backpressure of remote-actor messages (EXT_ACTOR_FLOW,
// actors/remote/actor_flow.hpp): the window rules alone, then a fast
// sender and a slow receiving actor on two harnessed nodes.

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/skip.hpp>

#include "actors/remote/actor_codec.hpp"
#include "actors/remote/actor_flow.hpp"
#include "test/actors/remote/harnessed_nodes.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(flow)

namespace {

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

/// What `sink` took so far.
std::vector<int32_t> taken(harnessed_nodes& t, const caf::actor& sink) {
  auto v = t.call<std::vector<int32_t>>(sink, caf::atom("seen"));
  BOOST_REQUIRE_MESSAGE(v, render(v));
  return *v;
}

std::vector<int32_t> iota_of(int32_t n) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n; ++i)
    out.push_back(i);
  return out;
}

/// Bytes of one int32 message as it travels.
uint64_t int32_message_bytes(caf::actor_system& sys) {
  auto one = serialize_message(sys, caf::make_message(int32_t{0}));
  BOOST_REQUIRE_MESSAGE(one, render(one));
  return one->size();
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
  auto server_opts = harness_options();
  server_opts.actor_window_messages = window;
  harnessed_nodes t{harness_options(), server_opts, agent_harness::unconnected};
  auto one = int32_message_bytes(t.client.sys());
  // Room for exactly the messages beyond the window.
  t.client.opts.actor_send_queue_bytes = (n - window) * one;
  std::tie(t.client_conn, t.server_conn) = t.connect();
  auto sink = t.spawn(t.server, slow_sink);
  t.publish("slow", sink);
  auto proxy = t.proxy_of("slow");
  // The proxy forwards on the sending thread: the window goes to the
  // agent, the rest waits on the sender's side.
  for (int32_t i = 0; i < n; ++i)
    caf::anon_send(proxy, i);
  // Settled: the slow actor returned no credit.
  auto c = t.stats(t.client_conn);
  BOOST_TEST(c.actor_in_flight == uint64_t{window});
  BOOST_TEST(c.actor_queued == uint64_t{n - window});
  BOOST_TEST(c.actor_queued_bytes == (n - window) * one);
  BOOST_TEST(c.actor_acks_received == 0u);
  // The queue is full: a request fails at once, naming the option.
  auto refused = t.call<int32_t>(proxy, int32_t{-1});
  BOOST_REQUIRE(!refused);
  BOOST_TEST(code_of(refused.error()) == errc::quota_exceeded,
             render(refused.error()));
  BOOST_TEST(what_of(refused.error()).find("actor-send-queue-bytes")
                 != std::string::npos,
             what_of(refused.error()));
  caf::anon_send(proxy, int32_t{-2}); // dropped (logged)
  c = t.stats(t.client_conn);
  BOOST_TEST(c.actor_send_refused == 2u);
  BOOST_TEST(c.actor_queued == uint64_t{n - window});
  // The receiver holds the window in the actor's mailbox, no more.
  auto s = t.stats(t.server_conn);
  BOOST_TEST(s.actor_buffered == uint64_t{window});
  BOOST_TEST(s.actor_buffered_max == uint64_t{window});
  BOOST_TEST(s.actor_acks_sent == 0u);
  BOOST_TEST(taken(t, sink).empty());
  // The actor catches up: everything arrives, in order, never more than
  // the window at once.
  caf::anon_send(sink, caf::atom("open"));
  t.settle();
  BOOST_TEST(taken(t, sink) == iota_of(n), "out of order or missing");
  s = t.stats(t.server_conn);
  BOOST_TEST(s.actor_buffered == 0u);
  BOOST_TEST(s.actor_buffered_max == uint64_t{window});
  BOOST_TEST(s.actor_acks_sent > 0u);
  c = t.stats(t.client_conn);
  BOOST_TEST(c.actor_queued == 0u);
  BOOST_TEST(c.actor_queued_bytes == 0u);
  BOOST_TEST(c.actor_in_flight == 0u);
  BOOST_TEST(c.actor_acks_received == s.actor_acks_sent);
  // Requests and their responses still work.
  auto r = t.call<int32_t>(proxy, int32_t{40}, int32_t{2});
  BOOST_REQUIRE_MESSAGE(r, render(r));
  BOOST_TEST(*r == 42);
}

BOOST_AUTO_TEST_CASE(chunked_messages_keep_their_order_in_a_small_window) {
  auto o = harness_options();
  o.actor_window_messages = 2;
  o.actor_window_bytes = 3 * o.max_message_len_bytes;
  harnessed_nodes t{o, o};
  auto checker = t.spawn(t.server, [](caf::event_based_actor*) {
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
  auto proxy = t.proxy_of("checker");
  constexpr int32_t n = 40; // up to ~38 KiB: several chunks each
  for (int32_t i = 0; i < n; ++i)
    caf::anon_send(
        proxy, i,
        byte_vector(static_cast<size_t>(i) * 977, static_cast<uint8_t>(i)));
  // Behind them on the connection: all arrived, in order, unharmed.
  auto seen = t.call<int32_t>(proxy, caf::atom("count"));
  BOOST_REQUIRE_MESSAGE(seen, render(seen));
  BOOST_TEST(*seen == n);
  auto s = t.stats(t.server_conn);
  BOOST_TEST(s.actor_buffered_max == 2u);
  BOOST_TEST(s.actor_acks_sent > 0u);
  BOOST_TEST(t.stats(t.client_conn).actor_queued == 0u);
}

BOOST_AUTO_TEST_CASE(a_peer_without_flow_control_still_works_within_limits) {
  constexpr int32_t window = 8;
  auto client_opts = harness_options();
  client_opts.actor_flow = false; // as a peer of before EXT_ACTOR_FLOW
  auto server_opts = harness_options();
  server_opts.actor_window_messages = window;
  harnessed_nodes t{client_opts, server_opts};
  auto sink = t.spawn(t.server, slow_sink);
  t.publish("slow", sink);
  auto proxy = t.proxy_of("slow");
  for (int32_t i = 0; i < window; ++i)
    caf::anon_send(proxy, i);
  t.settle();
  BOOST_TEST(t.stats(t.server_conn).actor_buffered == uint64_t{window});
  caf::anon_send(sink, caf::atom("open"));
  t.settle();
  BOOST_TEST(taken(t, sink) == iota_of(window));
  auto s = t.stats(t.server_conn);
  BOOST_TEST(s.actor_buffered == 0u);
  BOOST_TEST(s.actor_acks_sent == 0u);
  auto c = t.stats(t.client_conn);
  BOOST_TEST(c.actor_queued == 0u);
  BOOST_TEST(c.actor_acks_received == 0u);
  // Over the window in a slow actor's mailbox: the peer is disconnected.
  auto sink2 = t.spawn(t.server, slow_sink);
  t.publish("slow2", sink2);
  auto proxy2 = t.proxy_of("slow2");
  auto down = t.watch(proxy2);
  for (int32_t i = 0; i < window; ++i)
    caf::anon_send(proxy2, i);
  t.settle();
  BOOST_TEST(!down->down, "the window itself is within the limit");
  caf::anon_send(proxy2, window);
  t.settle();
  BOOST_REQUIRE(down->down);
  BOOST_TEST((down->reason == caf::exit_reason::remote_link_unreachable),
             render(down->reason));
}

BOOST_AUTO_TEST_SUITE_END()
