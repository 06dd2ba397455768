#include <boost/test/unit_test.hpp>

// The suite `proxies`: publish and lookup, requests and answers through
// proxies, handles inside messages, what cannot travel, and proxies that
// end (their remote actor or the connection went), between two harnessed
// nodes.

#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/sec.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "test/actors/remote/harnessed_nodes.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(proxies)

namespace {

using calc = caf::typed_actor<caf::replies_to<int32_t, int32_t>::with<int32_t>>;
using other_calc
    = caf::typed_actor<caf::replies_to<double, double>::with<double>>;

calc::behavior_type typed_calc() {
  return {[](int32_t a, int32_t b) { return a * b; }};
}

/// A type no actor system of these tests registers.
struct not_registered {
  int32_t x = 1;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, not_registered& v) {
  return f(caf::meta::type_name("not_registered"), v.x);
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

/// Sends `ping` to `target` and counts the (pong, ping) messages that come
/// back to it.
caf::behavior pinger(caf::event_based_actor* self, caf::actor target,
                     std::shared_ptr<int> pongs) {
  self->send(target, caf::atom("ping"));
  return {[pongs](caf::atom_value tag, caf::atom_value a) {
    if (tag == caf::atom("pong") && a == caf::atom("ping"))
      ++*pongs;
  }};
}

/// Keeps the last handle it was given (in a handle_box) and hands it out
/// for an int32.
caf::behavior keeper(caf::event_based_actor*) {
  auto kept = std::make_shared<caf::actor>();
  return {
      [kept](const handle_box& box) {
        *kept = box.hdl;
        return int32_t{1};
      },
      [kept](int32_t) { return handle_box{*kept}; },
  };
}

/// Answers (int32, int32) by delegating it to `target`.
caf::behavior delegator(caf::event_based_actor* self, caf::actor target) {
  return {[=](int32_t a, int32_t b) { return self->delegate(target, a, b); }};
}

} // namespace

BOOST_AUTO_TEST_CASE(request_response_with_values_and_errors) {
  harnessed_nodes t;
  t.publish("service", t.spawn(t.server, service));
  auto proxy = t.proxy_of("service");
  auto p = t.call<point>(proxy, point{1, 2});
  BOOST_REQUIRE_MESSAGE(p, render(p));
  BOOST_TEST(p->x == 2);
  BOOST_TEST(p->y == 3);
  auto sum = t.call<int32_t>(proxy, int32_t{40}, int32_t{2});
  BOOST_REQUIRE_MESSAGE(sum, render(sum));
  BOOST_TEST(*sum == 42);
  auto echo = t.call<std::string>(proxy, std::string{"hi"});
  BOOST_REQUIRE_MESSAGE(echo, render(echo));
  BOOST_TEST(*echo == "echo:hi");
  // The remote actor's own caf::error, with its code and text.
  auto err = t.call<std::string>(proxy, std::string{"fail"});
  BOOST_REQUIRE(!err);
  BOOST_TEST(code_of(err.error()) == errc::invalid_argument,
             render(err.error()));
  BOOST_TEST(what_of(err.error()) == "the service refuses 'fail'");
  // A second lookup gives the same proxy.
  BOOST_TEST((t.proxy_of("service") == proxy));
}

// A reply that cannot travel (an unregistered type) fails the request at
// once, naming the type, instead of leaving the requester to its timeout.
BOOST_AUTO_TEST_CASE(a_reply_that_cannot_travel_fails_the_request_at_once) {
  harnessed_nodes t;
  t.publish("unregistered",
            t.spawn(t.server, [](caf::event_based_actor*) -> caf::behavior {
              return {
                  [](int64_t) { return caf::make_message(not_registered{}); },
              };
            }));
  auto proxy = t.proxy_of("unregistered");
  // Answered within the settle: no timer had to fire.
  auto got = t.call<int32_t>(proxy, int64_t{1});
  BOOST_REQUIRE(!got);
  BOOST_TEST(code_of(got.error()) == errc::serialization_failed,
             render(got.error()));
  BOOST_TEST(what_of(got.error()).find("not_registered") != std::string::npos,
             render(got.error()));
}

// Each system has a node id of its own and a handle becomes a proxy on the
// receiving node: in a reply, in a request, plain or inside an application
// type, and a monitor of the proxy learns when the actor ends.
BOOST_AUTO_TEST_CASE(handles_in_messages_reach_their_actors_both_ways) {
  harnessed_nodes t;
  BOOST_TEST((t.client.sys().node() != t.server.sys().node()));
  BOOST_TEST(static_cast<bool>(t.client.sys().node()));
  t.publish("boxes", t.spawn(t.server, boxes));
  auto proxy = t.proxy_of("boxes");
  // A handle in a reply: the server's subscription actor.
  auto box = t.call<handle_box>(proxy, int32_t{1});
  BOOST_REQUIRE_MESSAGE(box, render(box));
  BOOST_REQUIRE(box->hdl);
  BOOST_TEST((box->hdl != proxy));
  BOOST_TEST((box->hdl.node() == t.client.sys().node()),
             "a proxy of this node");
  auto sub = t.call<std::string>(box->hdl, std::string{"x"});
  BOOST_REQUIRE_MESSAGE(sub, render(sub));
  BOOST_TEST(*sub == "sub:x");
  auto box2 = t.call<handle_box>(proxy, int32_t{1});
  BOOST_REQUIRE_MESSAGE(box2, render(box2));
  BOOST_TEST((box2->hdl != box->hdl), "a new subscription each time");
  // A handle in a request: the server asks the client's actor.
  auto echoer = t.spawn(t.client, subscription, std::string{"client"});
  auto asked = t.call<std::string>(proxy, handle_box{echoer});
  BOOST_REQUIRE_MESSAGE(asked, render(asked));
  BOOST_TEST(*asked == "client:from-server");
  // A plain handle, sent and returned: the client's proxy of the server's
  // proxy of the client's actor reaches the actor (through the server).
  auto back = t.call<caf::actor>(proxy, echoer);
  BOOST_REQUIRE_MESSAGE(back, render(back));
  BOOST_REQUIRE(*back);
  BOOST_TEST((*back != echoer));
  auto round = t.call<std::string>(*back, std::string{"y"});
  BOOST_REQUIRE_MESSAGE(round, render(round));
  BOOST_TEST(*round == "client:y");
  // The subscription ends: a monitor of its proxy learns it.
  auto down = t.watch(box->hdl);
  caf::anon_send(box->hdl, caf::atom("quit"));
  t.settle();
  BOOST_TEST(down->down);
  auto gone = t.call<std::string>(box->hdl, std::string{"x"});
  BOOST_TEST(!gone);
  // The other subscription lives on.
  auto again = t.call<std::string>(box2->hdl, std::string{"z"});
  BOOST_REQUIRE_MESSAGE(again, render(again));
  BOOST_TEST(*again == "sub:z");
}

// A handle of a third node: C gives the server a handle of its actor, the
// server hands it to the client, whose messages reach C's actor through
// the server.  When the server's connection to C goes, the client's proxy
// ends.
BOOST_AUTO_TEST_CASE(a_handle_of_a_third_node_reaches_it_through_the_peer) {
  harnessed_nodes t;
  BOOST_REQUIRE(
      t.server.published->publish("keeper", t.spawn(t.server, keeper)));
  auto& third = t.add_side("third", harness_options(),
                           std::make_unique<remote_config>(true));
  auto [c_conn, s_conn] = t.connect(third, t.server);
  auto c_keeper
      = t.call<caf::actor>(c_conn, lookup_atom::value, std::string{"keeper"});
  BOOST_REQUIRE_MESSAGE(c_keeper, render(c_keeper));
  auto c_actor = t.spawn(third, subscription, std::string{"third"});
  auto kept = t.call<int32_t>(*c_keeper, handle_box{c_actor});
  BOOST_REQUIRE_MESSAGE(kept, render(kept));
  auto box = t.call<handle_box>(t.proxy_of("keeper"), int32_t{0});
  BOOST_REQUIRE_MESSAGE(box, render(box));
  BOOST_REQUIRE(box->hdl);
  auto answer = t.call<std::string>(box->hdl, std::string{"hop"});
  BOOST_REQUIRE_MESSAGE(answer, render(answer));
  BOOST_TEST(*answer == "third:hop");
  // C leaves: the server's proxy of C's actor ends, and with it the
  // client's proxy of that proxy.
  auto down = t.watch(box->hdl);
  caf::anon_send_exit(c_conn, caf::exit_reason::user_shutdown);
  t.settle();
  BOOST_TEST(down->down);
  BOOST_TEST((down->reason == caf::exit_reason::remote_link_unreachable),
             render(down->reason));
  // The client's connection to the server lives on.
  auto again = t.call<handle_box>(t.proxy_of("keeper"), int32_t{0});
  BOOST_TEST(static_cast<bool>(again), render(again));
}

BOOST_AUTO_TEST_CASE(the_remote_actor_reaches_the_sender_through_its_proxy) {
  harnessed_nodes t;
  t.publish("service", t.spawn(t.server, service));
  auto pongs = std::make_shared<int>(0);
  t.spawn(t.client, pinger, t.proxy_of("service"), pongs);
  t.settle();
  BOOST_TEST(*pongs == 1);
}

BOOST_AUTO_TEST_CASE(delegate_to_a_proxy_answers_the_original_requester) {
  harnessed_nodes t;
  t.publish("service", t.spawn(t.server, service));
  auto middle = t.spawn(t.client, delegator, t.proxy_of("service"));
  auto sum = t.call<int32_t>(middle, int32_t{5}, int32_t{6});
  BOOST_REQUIRE_MESSAGE(sum, render(sum));
  BOOST_TEST(*sum == 11);
}

BOOST_AUTO_TEST_CASE(typed_lookups_are_checked_against_the_interface) {
  harnessed_nodes t;
  t.publish("calc", caf::actor_cast<caf::actor>(t.spawn(t.server, typed_calc)));
  auto& sys = t.client.sys();
  auto ok = t.lookup("calc", interface_of<calc>(sys));
  BOOST_REQUIRE_MESSAGE(ok, render(ok));
  auto typed = caf::actor_cast<calc>(*ok);
  auto product = t.call<int32_t>(typed, int32_t{6}, int32_t{7});
  BOOST_REQUIRE_MESSAGE(product, render(product));
  BOOST_TEST(*product == 42);
  auto bad = t.lookup("calc", interface_of<other_calc>(sys));
  BOOST_REQUIRE(!bad);
  BOOST_TEST(code_of(bad.error()) == errc::invalid_argument,
             render(bad.error()));
  // A dynamically typed actor never passes a typed lookup.
  t.publish("service", t.spawn(t.server, service));
  auto dyn = t.lookup("service", interface_of<calc>(sys));
  BOOST_REQUIRE(!dyn);
  BOOST_TEST(code_of(dyn.error()) == errc::invalid_argument);
}

BOOST_AUTO_TEST_CASE(lookups_larger_than_a_send_header_keep_the_connection) {
  harnessed_nodes t;
  auto& sys = t.client.sys();
  size_t printed = 0;
  for (auto& sig : interface_of<wide>(sys))
    printed += sig.size();
  BOOST_TEST_REQUIRE(printed > transport::max_send_header_bytes);
  t.publish("wide", caf::actor_cast<caf::actor>(t.spawn(t.server, wide_impl)));
  // The answer names the whole interface: it goes from pool memory.
  auto ok = t.lookup("wide", interface_of<wide>(sys));
  BOOST_REQUIRE_MESSAGE(ok, render(ok));
  auto typed = caf::actor_cast<wide>(*ok);
  auto sum = t.call<int32_t>(typed, int32_t{40}, int32_t{2});
  BOOST_REQUIRE_MESSAGE(sum, render(sum));
  BOOST_TEST(*sum == 42);
  // A lookup of the longest name allowed (with an interface, over the
  // header slot too) is answered, and the connection still serves.
  auto none = t.lookup(std::string(256, 'n'), interface_of<wide>(sys));
  BOOST_REQUIRE(!none);
  BOOST_TEST(code_of(none.error()) == errc::unknown_actor,
             render(none.error()));
  auto again = t.call<int32_t>(typed, int32_t{1}, int32_t{1});
  BOOST_REQUIRE_MESSAGE(again, render(again));
  BOOST_TEST(*again == 2);
}

BOOST_AUTO_TEST_CASE(unknown_names_and_unpublished_actors_are_not_found) {
  harnessed_nodes t;
  auto none = t.lookup("nobody");
  BOOST_REQUIRE(!none);
  BOOST_TEST(code_of(none.error()) == errc::unknown_actor,
             render(none.error()));
  t.publish("service", t.spawn(t.server, service));
  BOOST_REQUIRE(t.lookup("service"));
  auto was = t.call<bool>(t.server_conn, unpublish_atom::value,
                          std::string{"service"});
  BOOST_REQUIRE_MESSAGE(was, render(was));
  BOOST_TEST(*was);
  auto gone = t.lookup("service");
  BOOST_REQUIRE(!gone);
  BOOST_TEST(code_of(gone.error()) == errc::unknown_actor);
  // Published on the node: every connection serves it.
  BOOST_REQUIRE(
      t.server.published->publish("node-wide", t.spawn(t.server, service)));
  auto sum = t.call<int32_t>(t.proxy_of("node-wide"), int32_t{1}, int32_t{1});
  BOOST_REQUIRE_MESSAGE(sum, render(sum));
  BOOST_TEST(*sum == 2);
}

BOOST_AUTO_TEST_CASE(unregistered_types_are_an_error_to_the_sender) {
  harnessed_nodes t;
  t.publish("service", t.spawn(t.server, service));
  auto proxy = t.proxy_of("service");
  // Registered nowhere: refused before it leaves.
  auto r = t.call<int32_t>(proxy, unregistered_thing{1});
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::serialization_failed,
             render(r.error()));
  // Registered here only: the server cannot read it and says so.
  auto r2 = t.call<int32_t>(proxy, client_only{1});
  BOOST_REQUIRE(!r2);
  BOOST_TEST(code_of(r2.error()) == errc::serialization_failed,
             render(r2.error()));
  // An infinity: an error, not a sending thread that spins forever in
  // CAF's IEEE-754 packing.
  auto r4 = t.call<int32_t>(proxy, std::numeric_limits<double>::infinity());
  BOOST_REQUIRE(!r4);
  BOOST_TEST(code_of(r4.error()) == errc::serialization_failed,
             render(r4.error()));
  // The connection still serves.
  auto sum = t.call<int32_t>(proxy, int32_t{2}, int32_t{3});
  BOOST_REQUIRE_MESSAGE(sum, render(sum));
  BOOST_TEST(*sum == 5);
}

BOOST_AUTO_TEST_CASE(a_type_with_another_layout_on_the_peer_is_an_error) {
  // The server's "point" is a string.
  harnessed_nodes t{harness_options(), harness_options(), true};
  t.publish("service", t.spawn(t.server, service));
  auto proxy = t.proxy_of("service");
  auto r = t.call<point>(proxy, point{1, 2});
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::serialization_failed,
             render(r.error()));
  auto sum = t.call<int32_t>(proxy, int32_t{2}, int32_t{3});
  BOOST_REQUIRE_MESSAGE(sum, render(sum));
  BOOST_TEST(*sum == 5);
}

BOOST_AUTO_TEST_CASE(a_request_to_a_dead_actor_fails_with_receiver_down) {
  harnessed_nodes t;
  auto svc = t.spawn(t.server, service);
  t.publish("service", svc);
  auto proxy = t.proxy_of("service");
  caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
  t.settle();
  auto r = t.call<int32_t>(proxy, int32_t{1}, int32_t{2});
  BOOST_REQUIRE(!r);
  // As for a dead local actor in CAF 0.17: its exit reason (the proxy
  // quit with it once the peer said so).
  BOOST_TEST((r.error() == caf::exit_reason::user_shutdown),
             t.sys().render(r.error()));
}

BOOST_AUTO_TEST_CASE(proxies_quit_and_requests_fail_when_the_connection_goes) {
  harnessed_nodes t;
  // Answers nothing: the request stays pending; tells the watcher it came.
  auto got = std::make_shared<int>(0);
  auto watcher = t.spawn(
      t.server,
      [](caf::event_based_actor*, std::shared_ptr<int> n) -> caf::behavior {
        return {[n](caf::atom_value) { ++*n; }};
      },
      got);
  t.publish("silent", t.spawn(t.server, silent, watcher));
  auto proxy = t.proxy_of("silent");
  auto down = t.watch(proxy);
  auto pending = t.ask<int32_t>(proxy, int32_t{1}, int32_t{2});
  t.settle();
  // The request is on its way (the server got it) before the end.
  BOOST_TEST(*got == 1);
  BOOST_TEST(!pending->done);
  caf::anon_send_exit(t.client_conn, caf::exit_reason::user_shutdown);
  t.settle();
  BOOST_REQUIRE(down->down);
  // CAF's reason, as with CAF io; rdmactor's cause beside it.
  BOOST_TEST((down->reason == caf::exit_reason::remote_link_unreachable),
             render(down->reason));
  BOOST_TEST(code_of(cause_of(down->reason)) == errc::closed,
             render(down->reason));
  BOOST_REQUIRE(pending->done);
  auto failed = agent_harness::take(*pending);
  BOOST_REQUIRE(!failed);
  BOOST_TEST(code_of(failed.error()) == errc::closed, render(failed.error()));
  // A request to the dead proxy fails at once.
  auto r = t.call<int32_t>(proxy, int32_t{1}, int32_t{2});
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::closed, render(r.error()));
}

BOOST_AUTO_TEST_CASE(
    a_proxy_quits_with_the_reason_its_remote_actor_ended_with) {
  harnessed_nodes t;
  auto svc = t.spawn(t.server, service);
  t.publish("service", svc);
  auto proxy = t.proxy_of("service");
  auto down = t.watch(proxy);
  caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
  t.settle();
  BOOST_REQUIRE(down->down);
  BOOST_TEST((down->reason == caf::exit_reason::user_shutdown),
             t.sys().render(down->reason));
  // The connection itself lives on.
  t.publish("service2", t.spawn(t.server, service));
  auto sum = t.call<int32_t>(t.proxy_of("service2"), int32_t{3}, int32_t{4});
  BOOST_REQUIRE_MESSAGE(sum, render(sum));
  BOOST_TEST(*sum == 7);
}

BOOST_AUTO_TEST_CASE(messages_over_the_max_message_length_go_in_chunks) {
  harnessed_nodes t; // max message length 4096
  t.publish("service", t.spawn(t.server, service));
  auto proxy = t.proxy_of("service");
  for (size_t n : {size_t{1}, size_t{4000}, size_t{4096}, size_t{100000},
                   size_t{1} << 20}) {
    byte_vector v(n);
    for (size_t i = 0; i < n; ++i)
      v[i] = static_cast<uint8_t>(i * 7 + n);
    auto size = t.call<uint64_t>(proxy, v);
    BOOST_REQUIRE_MESSAGE(size, n << ": " << render(size));
    BOOST_TEST(*size == n);
    // Chunked both ways: the answer is the vector itself.
    auto back = t.call<byte_vector>(proxy, int32_t{0}, v);
    BOOST_REQUIRE_MESSAGE(back, n << ": " << render(back));
    BOOST_TEST((*back == v), n);
  }
  // No rendezvous between these nodes: every large one went in chunks.
  BOOST_TEST(t.stats(t.client_conn).rendezvous_sent == 0u);
  BOOST_TEST(t.stats(t.server_conn).rendezvous_sent == 0u);
}

BOOST_AUTO_TEST_CASE(messages_over_actor_max_message_bytes_are_refused) {
  auto o = harness_options();
  o.actor_max_message_bytes = 1 << 20;
  auto so = o;
  so.actor_max_message_bytes = 64 * 1024; // the server takes less
  harnessed_nodes t{o, so};
  t.publish("service", t.spawn(t.server, service));
  auto proxy = t.proxy_of("service");
  // Over our own limit: refused before it leaves.
  auto r = t.call<uint64_t>(proxy, byte_vector((1 << 20) + 1));
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::size_limit, render(r.error()));
  // Over the receiver's: it refuses, says so, and drops the chunks.
  auto r2 = t.call<uint64_t>(proxy, byte_vector(100000));
  BOOST_REQUIRE(!r2);
  BOOST_TEST(code_of(r2.error()) == errc::size_limit, render(r2.error()));
  // Within both: served, and the connection is fine.
  auto r3 = t.call<uint64_t>(proxy, byte_vector(60000));
  BOOST_REQUIRE_MESSAGE(r3, render(r3));
  BOOST_TEST(*r3 == 60000u);
}

BOOST_AUTO_TEST_SUITE_END()
