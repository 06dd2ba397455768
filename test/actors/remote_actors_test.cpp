#define BOOST_TEST_MODULE remote_actors
#include <boost/test/unit_test.hpp>

#include <limits>
#include <map>
#include <vector>

#include <caf/actor_registry.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/sec.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/remote/actor_codec.hpp"
#include "test/actors/remote_actors_fixture.hpp"
#include "test/reliability/peer_process.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

using calc = caf::typed_actor<caf::replies_to<int32_t, int32_t>::with<int32_t>>;
using other_calc
    = caf::typed_actor<caf::replies_to<double, double>::with<double>>;

std::chrono::seconds wait_time() {
  return std::chrono::seconds(30 * timeout_scale());
}

calc::behavior_type typed_calc() {
  return {[](int32_t a, int32_t b) { return a * b; }};
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

/// A type no actor system of these tests registers.
struct not_registered {
  int32_t x = 1;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, not_registered& v) {
  return f(caf::meta::type_name("not_registered"), v.x);
}

} // namespace

BOOST_AUTO_TEST_CASE(request_response_with_values_and_errors) {
  remote_nodes t;
  t.publish("service", t.server_sys.spawn(service));
  auto proxy = t.lookup("service");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  BOOST_REQUIRE(*proxy);
  auto p = call<point>(t.sys, *proxy, point{1, 2});
  BOOST_REQUIRE_MESSAGE(p, render(p));
  BOOST_TEST(p->x == 2);
  BOOST_TEST(p->y == 3);
  auto sum = call<int32_t>(t.sys, *proxy, int32_t{40}, int32_t{2});
  BOOST_REQUIRE_MESSAGE(sum, render(sum));
  BOOST_TEST(*sum == 42);
  auto echo = call<std::string>(t.sys, *proxy, std::string{"hi"});
  BOOST_REQUIRE_MESSAGE(echo, render(echo));
  BOOST_TEST(*echo == "echo:hi");
  // The remote actor's own caf::error, with its code and text.
  auto err = call<std::string>(t.sys, *proxy, std::string{"fail"});
  BOOST_REQUIRE(!err);
  BOOST_TEST(code_of(err.error()) == errc::invalid_argument,
             render(err.error()));
  BOOST_TEST(what_of(err.error()) == "the service refuses 'fail'");
  // A second lookup gives the same proxy.
  auto again = t.lookup("service");
  BOOST_REQUIRE(again);
  BOOST_TEST((*again == *proxy));
}

// A reply that cannot travel (an unregistered type) was dropped without a
// word: the requester waited until its own timeout.  It now gets the
// reason as its answer, at once, naming the type.
BOOST_AUTO_TEST_CASE(a_reply_that_cannot_travel_fails_the_request_at_once) {
  remote_nodes t;
  t.publish("unregistered",
            t.server_sys.spawn([](caf::event_based_actor*) -> caf::behavior {
              return {
                  [](int64_t) { return caf::make_message(not_registered{}); },
              };
            }));
  auto proxy = t.lookup("unregistered");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  caf::scoped_actor self{t.sys};
  caf::error got;
  self->request(*proxy, wait_time(), int64_t{1})
      .receive([&](caf::message&) { BOOST_FAIL("the reply arrived"); },
               [&](caf::error& e) { got = std::move(e); });
  BOOST_TEST(code_of(got) == errc::serialization_failed, render(got));
  BOOST_TEST(what_of(got).find("not_registered") != std::string::npos,
             render(got));
}

namespace {

/// A subscription: answers a string with "<tag>:<string>", quits on
/// 'quit'.
caf::behavior subscription(caf::event_based_actor* self, std::string tag) {
  return {
      [tag](const std::string& s) { return tag + ":" + s; },
      [self](caf::atom_value a) {
        if (a == caf::atom("quit"))
          self->quit();
      },
  };
}

/// Hands out a subscription in a reply (an int32), asks the actor in a
/// handle_box it gets for "from-server" and answers with its reply, and
/// answers an actor handle of its own with itself.
caf::behavior boxes(caf::event_based_actor* self) {
  return {
      [self](int32_t) {
        return handle_box{self->spawn(subscription, std::string{"sub"})};
      },
      [self](const handle_box& box) -> caf::result<std::string> {
        auto rp = self->make_response_promise<std::string>();
        self->request(box.hdl, std::chrono::seconds(30),
                      std::string{"from-server"})
            .then([rp](const std::string& s) mutable { rp.deliver(s); },
                  [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
        return rp;
      },
      [self](const caf::actor& hdl) { return hdl; },
  };
}

} // namespace

// An actor handle inside a message arrived null or, worse, as an unrelated
// actor of the receiving process (every system had the same invalid node
// id, so CAF looked the id up locally).  Each system now has a node id of
// its own and a handle becomes a proxy on the receiving node: in a reply,
// in a request, plain or inside an application type, and a monitor of the
// proxy learns when the actor ends.
BOOST_AUTO_TEST_CASE(handles_in_messages_reach_their_actors_both_ways) {
  remote_nodes t;
  BOOST_TEST((t.sys.node() != t.server_sys.node()));
  BOOST_TEST(static_cast<bool>(t.sys.node()));
  t.publish("boxes", t.server_sys.spawn(boxes));
  auto proxy = t.lookup("boxes");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  // A handle in a reply: the server's subscription actor.
  auto box = call<handle_box>(t.sys, *proxy, int32_t{1});
  BOOST_REQUIRE_MESSAGE(box, render(box));
  BOOST_REQUIRE(box->hdl);
  BOOST_TEST((box->hdl != *proxy));
  BOOST_TEST((box->hdl.node() == t.sys.node()), "a proxy of this node");
  auto sub = call<std::string>(t.sys, box->hdl, std::string{"x"});
  BOOST_REQUIRE_MESSAGE(sub, render(sub));
  BOOST_TEST(*sub == "sub:x");
  // The same handle again is the same proxy.
  auto box2 = call<handle_box>(t.sys, *proxy, int32_t{1});
  BOOST_REQUIRE(box2);
  BOOST_TEST((box2->hdl != box->hdl), "a new subscription each time");
  // A handle in a request: the server asks the client's actor.
  auto echoer = t.sys.spawn(subscription, std::string{"client"});
  auto asked = call<std::string>(t.sys, *proxy, handle_box{echoer});
  BOOST_REQUIRE_MESSAGE(asked, render(asked));
  BOOST_TEST(*asked == "client:from-server");
  // A plain handle, sent and returned: the client's proxy of the server's
  // proxy of the client's actor reaches the actor (through the server).
  auto back = call<caf::actor>(t.sys, *proxy, echoer);
  BOOST_REQUIRE_MESSAGE(back, render(back));
  BOOST_REQUIRE(*back);
  auto round = call<std::string>(t.sys, *back, std::string{"y"});
  BOOST_REQUIRE_MESSAGE(round, render(round));
  BOOST_TEST(*round == "client:y");
  // The subscription ends: a monitor of its proxy learns it.
  caf::scoped_actor self{t.sys};
  self->monitor(box->hdl);
  self->send(box->hdl, caf::atom("quit"));
  bool down = false;
  self->receive(
      [&](const caf::down_msg& d) { down = d.source == box->hdl.address(); },
      caf::after(wait_time()) >> [] { BOOST_FAIL("no down message"); });
  BOOST_TEST(down);
  auto gone = call<std::string>(t.sys, box->hdl, std::string{"x"});
  BOOST_TEST(!gone);
  // The service lives on.
  auto again = call<std::string>(t.sys, box2->hdl, std::string{"z"});
  BOOST_REQUIRE_MESSAGE(again, render(again));
  BOOST_TEST(*again == "sub:z");
}

// A handle of a third node: C gives the server a handle of its actor, the
// server hands it to the client, whose messages reach C's actor through
// the server.  When the server's connection to C goes, the client's proxy
// ends.
BOOST_AUTO_TEST_CASE(a_handle_of_a_third_node_reaches_it_through_the_peer) {
  remote_nodes t;
  // The server keeps the last handle it was given and hands it out.
  auto keeper
      = t.server_sys.spawn([](caf::event_based_actor* self) -> caf::behavior {
          auto kept = std::make_shared<caf::actor>();
          return {
              [kept](const handle_box& box) {
                *kept = box.hdl;
                return int32_t{1};
              },
              [kept](int32_t) { return handle_box{*kept}; },
          };
        });
  BOOST_REQUIRE(t.server->publish("keeper", keeper)); // every connection
  remote_system third{true};
  auto c = node::open(third.sys, test_options());
  BOOST_REQUIRE_MESSAGE(c, render(c));
  auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
  auto port
      = t.server->listen(host + ":0", caf::actor_cast<caf::actor>(*t.acceptor));
  BOOST_REQUIRE_MESSAGE(port, render(port));
  auto c_conn = (*c)->connect(host + ":" + std::to_string(*port));
  BOOST_REQUIRE_MESSAGE(c_conn, render(c_conn));
  auto c_keeper = call<caf::actor>(third.sys, *c_conn, lookup_atom::value,
                                   std::string{"keeper"});
  BOOST_REQUIRE_MESSAGE(c_keeper, render(c_keeper));
  auto c_actor = third.sys.spawn(subscription, std::string{"third"});
  auto kept = call<int32_t>(third.sys, *c_keeper, handle_box{c_actor});
  BOOST_REQUIRE_MESSAGE(kept, render(kept));
  auto proxy = t.lookup("keeper");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  auto box = call<handle_box>(t.sys, *proxy, int32_t{0});
  BOOST_REQUIRE_MESSAGE(box, render(box));
  BOOST_REQUIRE(box->hdl);
  auto answer = call<std::string>(t.sys, box->hdl, std::string{"hop"});
  BOOST_REQUIRE_MESSAGE(answer, render(answer));
  BOOST_TEST(*answer == "third:hop");
  // C leaves: the server's proxy of C's actor ends, and with it the
  // client's proxy of that proxy.
  caf::scoped_actor self{t.sys};
  self->monitor(box->hdl);
  (*c)->close();
  bool down = false;
  self->receive([&](const caf::down_msg&) { down = true; },
                caf::after(wait_time()) >> [] { BOOST_FAIL("no down"); });
  BOOST_TEST(down);
}

BOOST_AUTO_TEST_CASE(the_remote_actor_reaches_the_sender_through_its_proxy) {
  remote_nodes t;
  t.publish("service", t.server_sys.spawn(service));
  auto proxy = t.lookup("service");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  caf::scoped_actor self{t.sys};
  self->send(*proxy, caf::atom("ping"));
  bool got = false;
  self->receive(
      [&](caf::atom_value tag, caf::atom_value a) {
        got = tag == caf::atom("pong") && a == caf::atom("ping");
      },
      caf::after(wait_time()) >> [] { BOOST_FAIL("no pong"); });
  BOOST_TEST(got);
}

BOOST_AUTO_TEST_CASE(delegate_to_a_proxy_answers_the_original_requester) {
  remote_nodes t;
  t.publish("service", t.server_sys.spawn(service));
  auto proxy = t.lookup("service");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  auto target = *proxy;
  auto middle = t.sys.spawn([target](
                                caf::event_based_actor* self) -> caf::behavior {
    return {[=](int32_t a, int32_t b) { return self->delegate(target, a, b); }};
  });
  auto sum = call<int32_t>(t.sys, middle, int32_t{5}, int32_t{6});
  BOOST_REQUIRE_MESSAGE(sum, render(sum));
  BOOST_TEST(*sum == 11);
  caf::anon_send_exit(middle, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(typed_lookups_are_checked_against_the_interface) {
  remote_nodes t;
  t.publish("calc",
            caf::actor_cast<caf::actor>(t.server_sys.spawn(typed_calc)));
  auto ok = call<caf::actor>(t.sys, t.client_conn, lookup_atom::value,
                             std::string{"calc"}, interface_of<calc>(t.sys));
  BOOST_REQUIRE_MESSAGE(ok, render(ok));
  auto typed = caf::actor_cast<calc>(*ok);
  auto product = call<int32_t>(t.sys, typed, int32_t{6}, int32_t{7});
  BOOST_REQUIRE_MESSAGE(product, render(product));
  BOOST_TEST(*product == 42);
  auto bad
      = call<caf::actor>(t.sys, t.client_conn, lookup_atom::value,
                         std::string{"calc"}, interface_of<other_calc>(t.sys));
  BOOST_REQUIRE(!bad);
  BOOST_TEST(code_of(bad.error()) == errc::invalid_argument,
             render(bad.error()));
  // A dynamically typed actor never passes a typed lookup.
  t.publish("service", t.server_sys.spawn(service));
  auto dyn
      = call<caf::actor>(t.sys, t.client_conn, lookup_atom::value,
                         std::string{"service"}, interface_of<calc>(t.sys));
  BOOST_REQUIRE(!dyn);
  BOOST_TEST(code_of(dyn.error()) == errc::invalid_argument);
}

namespace {

/// A typed interface whose signatures print to far more than the 256 bytes
/// of a send's header slot (the replicated-log sample's leader has one).
using wide = caf::typed_actor<
    caf::replies_to<int32_t, int32_t>::with<int32_t>,
    caf::replies_to<std::string, std::string, std::string>::with<std::string>,
    caf::replies_to<std::vector<std::string>>::with<uint64_t>,
    caf::replies_to<double, double, double>::with<double, double>,
    caf::replies_to<int64_t, uint64_t, int16_t, uint16_t>::with<int8_t>,
    caf::replies_to<std::vector<int64_t>, std::vector<double>>::with<bool>,
    caf::reacts_to<uint8_t, uint16_t, uint32_t, uint64_t, std::string>>;

wide::behavior_type wide_impl() {
  return {
      [](int32_t a, int32_t b) { return a + b; },
      [](const std::string& a, const std::string& b, const std::string& c) {
        return a + b + c;
      },
      [](const std::vector<std::string>& v) { return uint64_t{v.size()}; },
      [](double a, double b, double c) { return std::make_tuple(a + b, c); },
      [](int64_t, uint64_t, int16_t, uint16_t) { return int8_t{1}; },
      [](const std::vector<int64_t>&, const std::vector<double>&) {
        return true;
      },
      [](uint8_t, uint16_t, uint32_t, uint64_t, const std::string&) {},
  };
}

} // namespace

BOOST_AUTO_TEST_CASE(lookups_larger_than_a_send_header_keep_the_connection) {
  remote_nodes t;
  size_t printed = 0;
  for (auto& sig : interface_of<wide>(t.sys))
    printed += sig.size();
  BOOST_TEST_REQUIRE(printed > transport::max_send_header_bytes);
  t.publish("wide", caf::actor_cast<caf::actor>(t.server_sys.spawn(wide_impl)));
  // The answer names the whole interface: it goes from pool memory.
  auto ok = call<caf::actor>(t.sys, t.client_conn, lookup_atom::value,
                             std::string{"wide"}, interface_of<wide>(t.sys));
  BOOST_REQUIRE_MESSAGE(ok, render(ok));
  auto typed = caf::actor_cast<wide>(*ok);
  auto sum = call<int32_t>(t.sys, typed, int32_t{40}, int32_t{2});
  BOOST_REQUIRE_MESSAGE(sum, render(sum));
  BOOST_TEST(*sum == 42);
  // A lookup of the longest name allowed (with an interface, over the
  // header slot too) is answered, and the connection still serves.
  auto none
      = call<caf::actor>(t.sys, t.client_conn, lookup_atom::value,
                         std::string(256, 'n'), interface_of<wide>(t.sys));
  BOOST_REQUIRE(!none);
  BOOST_TEST(code_of(none.error()) == errc::unknown_actor,
             render(none.error()));
  auto again = call<int32_t>(t.sys, typed, int32_t{1}, int32_t{1});
  BOOST_REQUIRE_MESSAGE(again, render(again));
  BOOST_TEST(*again == 2);
}

BOOST_AUTO_TEST_CASE(unknown_names_and_unpublished_actors_are_not_found) {
  remote_nodes t;
  auto none = t.lookup("nobody");
  BOOST_REQUIRE(!none);
  BOOST_TEST(code_of(none.error()) == errc::unknown_actor,
             render(none.error()));
  t.publish("service", t.server_sys.spawn(service));
  BOOST_REQUIRE(t.lookup("service"));
  auto was = call<bool>(t.server_sys, t.server_conn, unpublish_atom::value,
                        std::string{"service"});
  BOOST_REQUIRE(was);
  BOOST_TEST(*was);
  auto gone = t.lookup("service");
  BOOST_REQUIRE(!gone);
  BOOST_TEST(code_of(gone.error()) == errc::unknown_actor);
  // Published on the node: every connection serves it.
  BOOST_REQUIRE(t.server->publish("node-wide", t.server_sys.spawn(service)));
  auto nw = t.lookup("node-wide");
  BOOST_REQUIRE_MESSAGE(nw, render(nw));
  auto sum = call<int32_t>(t.sys, *nw, int32_t{1}, int32_t{1});
  BOOST_REQUIRE(sum);
  BOOST_TEST(*sum == 2);
}

BOOST_AUTO_TEST_CASE(unregistered_types_are_an_error_to_the_sender) {
  remote_nodes t;
  t.publish("service", t.server_sys.spawn(service));
  auto proxy = t.lookup("service");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  // Registered nowhere: refused before it leaves.
  auto r = call<int32_t>(t.sys, *proxy, unregistered_thing{1});
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::serialization_failed,
             render(r.error()));
  // Registered here only: the server cannot read it and says so.
  auto r2 = call<int32_t>(t.sys, *proxy, client_only{1});
  BOOST_REQUIRE(!r2);
  BOOST_TEST(code_of(r2.error()) == errc::serialization_failed,
             render(r2.error()));
  // An infinity: an error, not a sending thread that spins forever in
  // CAF's IEEE-754 packing.
  auto r4
      = call<int32_t>(t.sys, *proxy, std::numeric_limits<double>::infinity());
  BOOST_REQUIRE(!r4);
  BOOST_TEST(code_of(r4.error()) == errc::serialization_failed,
             render(r4.error()));
  // The connection still serves.
  auto sum = call<int32_t>(t.sys, *proxy, int32_t{2}, int32_t{3});
  BOOST_REQUIRE_MESSAGE(sum, render(sum));
  BOOST_TEST(*sum == 5);
}

BOOST_AUTO_TEST_CASE(a_type_with_another_layout_on_the_peer_is_an_error) {
  remote_nodes t{true}; // the server's "point" is a string
  t.publish("service", t.server_sys.spawn(service));
  auto proxy = t.lookup("service");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  auto r = call<point>(t.sys, *proxy, point{1, 2});
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::serialization_failed,
             render(r.error()));
  auto sum = call<int32_t>(t.sys, *proxy, int32_t{2}, int32_t{3});
  BOOST_REQUIRE_MESSAGE(sum, render(sum));
}

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

BOOST_AUTO_TEST_CASE(a_request_to_a_dead_actor_fails_with_receiver_down) {
  remote_nodes t;
  auto svc = t.server_sys.spawn(service);
  t.publish("service", svc);
  auto proxy = t.lookup("service");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  {
    caf::scoped_actor w{t.server_sys};
    w->monitor(svc);
    caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
    w->receive([](caf::down_msg&) {});
  }
  auto r = call<int32_t>(t.sys, *proxy, int32_t{1}, int32_t{2});
  BOOST_REQUIRE(!r);
  // As for a dead local actor in CAF 0.17: its exit reason (the proxy
  // quit with it), or request_receiver_down.
  BOOST_TEST((r.error() == caf::sec::request_receiver_down
              || r.error() == caf::exit_reason::user_shutdown),
             t.sys.render(r.error()));
}

BOOST_AUTO_TEST_CASE(proxies_quit_and_requests_fail_when_the_connection_goes) {
  remote_nodes t;
  // Answers nothing: the request stays pending; tells `watcher` it came.
  caf::scoped_actor watcher{t.server_sys};
  auto w = caf::actor{watcher};
  auto silent
      = t.server_sys.spawn([w](caf::event_based_actor* self) -> caf::behavior {
          return {[=](int32_t, int32_t) -> caf::result<int32_t> {
            self->send(w, caf::atom("got"));
            return self->make_response_promise<int32_t>();
          }};
        });
  t.publish("silent", silent);
  auto proxy = t.lookup("silent");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  caf::scoped_actor self{t.sys};
  self->monitor(*proxy);
  caf::error failed;
  auto requester = t.sys.spawn([&, target = *proxy](caf::event_based_actor* s) {
    s->request(target, wait_time(), int32_t{1}, int32_t{2})
        .then([](int32_t) {},
              [&failed, s, self = caf::actor{self}](caf::error& e) {
                failed = e;
                s->send(self, caf::atom("failed"));
              });
  });
  // The request is on its way (the server got it) before the end.
  watcher->receive([](caf::atom_value) {},
                   caf::after(wait_time()) >> [] { BOOST_FAIL("no request"); });
  caf::anon_send_exit(t.client_conn, caf::exit_reason::user_shutdown);
  bool down = false;
  bool got_failed = false;
  for (int i = 0; i < 2; ++i)
    self->receive(
        [&](caf::down_msg& m) {
          down = true;
          // CAF's reason, as with CAF io; rdmactor's cause beside it.
          BOOST_TEST((m.reason == caf::exit_reason::remote_link_unreachable),
                     render(m.reason));
          BOOST_TEST(code_of(cause_of(m.reason)) == errc::closed,
                     render(m.reason));
        },
        [&](caf::atom_value) { got_failed = true; },
        caf::after(wait_time()) >> [] { BOOST_FAIL("nothing"); });
  BOOST_TEST(down);
  BOOST_TEST(got_failed);
  BOOST_TEST(code_of(failed) == errc::closed, render(failed));
  // A request to the dead proxy fails at once.
  auto r = call<int32_t>(t.sys, *proxy, int32_t{1}, int32_t{2});
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::closed, render(r.error()));
  caf::anon_send_exit(silent, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(requester, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(
    a_proxy_quits_with_the_reason_its_remote_actor_ended_with) {
  remote_nodes t;
  auto svc = t.server_sys.spawn(service);
  t.publish("service", svc);
  auto proxy = t.lookup("service");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  caf::scoped_actor self{t.sys};
  self->monitor(*proxy);
  caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
  caf::error why;
  self->receive([&](caf::down_msg& m) { why = m.reason; },
                caf::after(wait_time()) >> [] { BOOST_FAIL("no down"); });
  BOOST_TEST((why == caf::exit_reason::user_shutdown), t.sys.render(why));
  // The connection itself lives on.
  t.publish("service2", t.server_sys.spawn(service));
  auto p2 = t.lookup("service2");
  BOOST_REQUIRE_MESSAGE(p2, render(p2));
  auto sum = call<int32_t>(t.sys, *p2, int32_t{3}, int32_t{4});
  BOOST_REQUIRE(sum);
  BOOST_TEST(*sum == 7);
}

BOOST_AUTO_TEST_CASE(messages_over_the_max_message_length_go_in_chunks) {
  remote_nodes t; // max message length 4096
  t.publish("service", t.server_sys.spawn(service));
  auto proxy = t.lookup("service");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  for (size_t n : {size_t{1}, size_t{4000}, size_t{4096}, size_t{100000},
                   size_t{1} << 20}) {
    byte_vector v(n);
    for (size_t i = 0; i < n; ++i)
      v[i] = static_cast<uint8_t>(i * 7 + n);
    auto size = call<uint64_t>(t.sys, *proxy, v);
    BOOST_REQUIRE_MESSAGE(size, n << ": " << render(size));
    BOOST_TEST(*size == n);
    // Chunked both ways: the answer is the vector itself.
    auto back = call<byte_vector>(t.sys, *proxy, int32_t{0}, v);
    BOOST_REQUIRE_MESSAGE(back, n << ": " << render(back));
    BOOST_TEST((*back == v), n);
  }
}

BOOST_AUTO_TEST_CASE(messages_over_actor_max_message_bytes_are_refused) {
  auto o = test_options();
  o.actor_max_message_bytes = 1 << 20;
  auto so = o;
  so.actor_max_message_bytes = 64 * 1024; // the server takes less
  remote_nodes t{false, o, so};
  t.publish("service", t.server_sys.spawn(service));
  auto proxy = t.lookup("service");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  // Over our own limit: refused before it leaves.
  auto r = call<uint64_t>(t.sys, *proxy, byte_vector((1 << 20) + 1));
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::size_limit, render(r.error()));
  // Over the receiver's: it refuses, says so, and drops the chunks.
  auto r2 = call<uint64_t>(t.sys, *proxy, byte_vector(100000));
  BOOST_REQUIRE(!r2);
  BOOST_TEST(code_of(r2.error()) == errc::size_limit, render(r2.error()));
  // Within both: served, and the connection is fine.
  auto r3 = call<uint64_t>(t.sys, *proxy, byte_vector(60000));
  BOOST_REQUIRE_MESSAGE(r3, render(r3));
  BOOST_TEST(*r3 == 60000u);
}

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
