#define BOOST_TEST_MODULE remote_actors
#include <boost/test/unit_test.hpp>

// Remote actors between nodes on the fabric (soft, and verbs through
// test/verbs/CMakeLists.txt): the cases that need what the deterministic
// harness (test/actors/remote/, on test/support/remote_harness.hpp) does
// not have: real threads, a second process.  Everything else about
// remote actors runs there, without sleeps.

#include <map>

#include <caf/event_based_actor.hpp>

#include "test/actors/remote_actors_fixture.hpp"
#include "test/reliability/peer_process.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

std::chrono::seconds wait_time() {
  return std::chrono::seconds(30 * timeout_scale());
}

/// Checks the order of (sender index, seq) messages per sender; answers
/// (atom, index) with the count seen from that sender, -1 if any message
/// came out of order.
caf::behavior order_checker(caf::event_based_actor* self) {
  auto next = std::make_shared<std::map<int32_t, int32_t>>();
  auto ok = std::make_shared<bool>(true);
  return {
      [=](int32_t idx, int32_t seq) {
        auto& n = (*next)[idx];
        if (seq != n)
          *ok = false;
        ++n;
      },
      [=](caf::atom_value, int32_t idx) { return *ok ? (*next)[idx] : -1; },
  };
}

} // namespace

// Concurrent senders on CAF's worker threads racing into one proxy: about
// real threads (the harness runs one actor at a time, in a fixed order).
BOOST_AUTO_TEST_CASE(ten_thousand_messages_arrive_in_order_per_sender) {
  // The receiver answers nothing while it works through the flood, and in
  // the emulated Soft-RoCE VM that takes longer than the default
  // keepalive: its Pong waits behind thousands of frames in its agent's
  // mailbox.  Scale the keepalive as the other timeouts.
  auto o = test_options();
  o.keepalive_ms = 5000 * timeout_scale();
  remote_nodes t{false, o};
  t.publish("checker", t.server_sys.spawn(order_checker));
  auto proxy = t.lookup("checker");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  constexpr int32_t senders = 4;
  constexpr int32_t per_sender = 2500;
  caf::scoped_actor self{t.sys};
  auto target = *proxy;
  auto me = caf::actor{self};
  for (int32_t idx = 0; idx < senders; ++idx)
    t.sys.spawn([=](caf::event_based_actor* s) {
      for (int32_t seq = 0; seq < per_sender; ++seq)
        s->send(target, idx, seq);
      // Behind every message of this sender.
      s->request(target, wait_time(), caf::atom("count"), idx)
          .then([=](int32_t n) { s->send(me, idx, n); },
                [=](caf::error&) { s->send(me, idx, int32_t{-2}); });
    });
  int32_t total = 0;
  for (int32_t i = 0; i < senders; ++i)
    self->receive(
        [&](int32_t idx, int32_t n) {
          BOOST_TEST(n == per_sender, "sender " << idx << " saw " << n);
          if (n > 0)
            total += n;
        },
        caf::after(wait_time()) >>
            [] { BOOST_FAIL("a sender did not finish"); });
  BOOST_TEST(total == senders * per_sender);
}

// A peer process killed with SIGKILL: about processes and the fabric's
// view of a peer that vanishes without a word.
BOOST_AUTO_TEST_CASE(a_killed_peer_process_ends_proxies_and_requests) {
  auto o = test_options();
  o.keepalive_ms = 1000 * timeout_scale();
  remote_system me{true};
  auto n = node::open(me.sys, o);
  BOOST_REQUIRE_MESSAGE(n, render(n));
  auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
  caf::scoped_actor acc{me.sys};
  auto port = (*n)->listen(host + ":0", caf::actor_cast<caf::actor>(acc));
  BOOST_REQUIRE_MESSAGE(port, render(port));
  peer_process peer{RDMACTOR_REMOTE_ACTOR_PEER,
                    {host + ":" + std::to_string(*port)}};
  BOOST_REQUIRE(peer.started());
  connection_actor conn;
  acc->receive([&](accepted_atom, connection_actor& c) { conn = c; },
               caf::after(wait_time()) >> [] {});
  BOOST_REQUIRE(conn);
  BOOST_REQUIRE(peer.wait_for("ready", wait_time()) == "ready");
  auto svc = call<caf::actor>(me.sys, conn, lookup_atom::value,
                              std::string{"service"});
  BOOST_REQUIRE_MESSAGE(svc, render(svc));
  auto quiet = call<caf::actor>(me.sys, conn, lookup_atom::value,
                                std::string{"silent"});
  BOOST_REQUIRE_MESSAGE(quiet, render(quiet));
  // Two processes: a value there and back.
  auto p = call<point>(me.sys, *svc, point{10, 20});
  BOOST_REQUIRE_MESSAGE(p, render(p));
  BOOST_TEST(p->x == 11);
  caf::scoped_actor self{me.sys};
  self->monitor(*svc);
  self->monitor(*quiet);
  auto me_hdl = caf::actor{self};
  auto requester = me.sys.spawn([=, q = *quiet,
                                 s = *svc](caf::event_based_actor* r) {
    r->request(q, wait_time(), int32_t{1}, int32_t{2})
        .then([](int32_t) {},
              [=](caf::error& e) { r->send(me_hdl, caf::atom("failed"), e); });
    // Behind the first on the connection: once this is answered, the
    // silent actor holds the first.
    r->request(s, wait_time(), int32_t{1}, int32_t{2})
        .then([=](int32_t) { r->send(me_hdl, caf::atom("sent")); },
              [](caf::error&) {});
  });
  self->receive([](caf::atom_value) {},
                caf::after(wait_time()) >> [] { BOOST_FAIL("not sent"); });
  peer.kill();
  int downs = 0;
  bool failed = false;
  for (int i = 0; i < 3; ++i)
    self->receive(
        [&](caf::down_msg& m) {
          ++downs;
          BOOST_TEST((m.reason == caf::exit_reason::remote_link_unreachable),
                     render(m.reason));
          BOOST_TEST(code_of(cause_of(m.reason)) == errc::peer_gone,
                     render(m.reason));
        },
        [&](caf::atom_value, caf::error& e) {
          failed = true;
          BOOST_TEST(code_of(e) == errc::peer_gone, render(e));
        },
        caf::after(wait_time()) >> [] { BOOST_FAIL("nothing within bound"); });
  BOOST_TEST(downs == 2);
  BOOST_TEST(failed);
  caf::anon_send_exit(requester, caf::exit_reason::user_shutdown);
  BOOST_TEST(eventually([&] { return (*n)->memory_stats().bytes_in_use == 0; },
                        wait_time()));
  (*n)->close();
}
