#include <boost/test/unit_test.hpp>

// The hostile suite, actor messages to a node's published actors: forged
// handles, deep nests, lone errors, typed interfaces and messages nobody
// takes.  Hostile actor frames, payloads CAF cannot handle, acks and the
// actor window run on the deterministic harness
// (connection/hostile_actor_messages_test.cpp).

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/sec.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "rdmactor/unexpected.hpp"

#include "common/node_identity.hpp"
#include "test/actors/hostile_fixture.hpp"
#include "test/actors/nested_payload.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

/// A request id as CAF writes one (what the raw peer's actor 7 sends).
constexpr uint64_t request_mid = 0x1000000000000001ull;

template <class T>
std::vector<char> bytes_of(caf::actor_system& sys, const T& x) {
  auto b = serialize_message(sys, caf::make_message(x));
  BOOST_REQUIRE_MESSAGE(b, render(b));
  return *b;
}

/// An untyped actor that adds one to an int32_t.
caf::behavior add_one(caf::event_based_actor*) {
  return {[](int32_t x) { return x + 1; }};
}

using add_atom = caf::atom_constant<caf::atom("add")>;
using adder = caf::typed_actor<
    caf::replies_to<add_atom, int32_t, int32_t>::with<int32_t>>;

} // namespace

BOOST_FIXTURE_TEST_SUITE(hostile, raw_peer_fixture)

// A message of config values nested 20,000 lists deep overflowed the
// stack inside CAF's deserializer, on every node, even as a down notice
// for any id.  Now a down notice for an actor we have no proxy of is not
// read at all, and a nest past the limit is refused before it loads.
BOOST_AUTO_TEST_CASE(deeply_nested_payloads_are_refused_never_a_crash) {
  auto svc = sys.spawn(add_one);
  BOOST_REQUIRE(server->publish("svc", svc));
  auto target = reach("svc");
  auto deep = nested_config_value_bytes(sys, 1500); // one 4 KiB frame
  auto before = server_stats().protocol_errors;
  send_actor_message(424242, deep, 0, 0, true); // a down notice: not read
  send_actor_message(target, deep, 7, request_mid);
  expect_refusal(errc::serialization_failed, "nested more than", before + 1);
  expect_still_serving();
  auto alive = call<int32_t>(sys, svc, int32_t{1});
  BOOST_REQUIRE_MESSAGE(alive, render(alive));
  BOOST_TEST(*alive == 2);
  caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
}

// A peer that forges a handle naming one of the receiver's own actors
// (here the raw peer shares the server's actor system, so it knows the
// node id, as a peer that learned it would) reaches none of them: the
// message is refused before anything is delivered.
BOOST_AUTO_TEST_CASE(a_forged_handle_of_the_receivers_actor_reaches_nothing) {
  auto touched = std::make_shared<std::atomic<int>>(0);
  auto hidden = sys.spawn([touched](caf::event_based_actor*) -> caf::behavior {
    return {[touched](int32_t) { ++*touched; }};
  });
  auto svc = sys.spawn([](caf::event_based_actor* self) -> caf::behavior {
    return {[=](handle_box& box) {
      self->send(box.hdl, int32_t{1});
      return int32_t{0};
    }};
  });
  BOOST_REQUIRE(server->publish("svc", svc));
  auto target = reach("svc");
  auto forged = serialize_message(sys, caf::make_message(handle_box{hidden}));
  BOOST_REQUIRE_MESSAGE(forged, render(forged));
  auto before = server_stats().protocol_errors;
  send_actor_message(target, *forged, 7, request_mid);
  expect_refusal(errc::serialization_failed, "names an actor of this node",
                 before + 1);
  expect_still_serving();
  BOOST_TEST(touched->load() == 0);
  caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(hidden, caf::exit_reason::user_shutdown);
}

// A peer's handles name the peer's own actors: the first node id it names
// is taken as its own, a handle of any other node is refused (a peer
// cannot make the receiver hold proxies of nodes it does not reach), and
// the connection keeps serving.
BOOST_AUTO_TEST_CASE(a_peers_handles_name_only_its_own_node) {
  auto svc = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](handle_box& box) { return int32_t{box.hdl ? 1 : 0}; }};
  });
  BOOST_REQUIRE(server->publish("svc", svc));
  auto target = reach("svc");
  auto any = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](int32_t) {}};
  });
  auto bytes = serialize_message(sys, caf::make_message(handle_box{any}));
  BOOST_REQUIRE_MESSAGE(bytes, render(bytes));
  auto secret = secret_of(sys);
  BOOST_REQUIRE(secret);
  // The handle, as a node whose host id is all `b` would write it.
  auto as_node = [&](uint8_t b) {
    auto v = *bytes;
    auto at = std::search(
        v.begin(), v.end(), secret->begin(), secret->end(),
        [](char a, uint8_t b) { return static_cast<uint8_t>(a) == b; });
    BOOST_REQUIRE(at != v.end());
    std::fill_n(at, secret->size(), static_cast<char>(b));
    return v;
  };
  auto before = server_stats().protocol_errors;
  send_actor_message(target, as_node(0x11), 7, request_mid);
  // The first becomes a proxy (the service sees a valid handle).
  auto first = next_actor_message();
  BOOST_REQUIRE_MESSAGE(first.second.match_elements<int32_t>(),
                        to_string(first.second));
  BOOST_TEST(first.second.get_as<int32_t>(0) == 1);
  send_actor_message(target, as_node(0x22), 7, request_mid + 1);
  expect_refusal(errc::serialization_failed, "which is not its own",
                 before + 1);
  expect_still_serving();
  caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(any, caf::exit_reason::user_shutdown);
}

// One asynchronous message that holds just a caf::error made published
// actors quit (CAF's default error handler), and every client with them.
BOOST_AUTO_TEST_CASE(a_lone_error_cannot_make_a_published_actor_quit) {
  auto svc = sys.spawn(add_one);
  BOOST_REQUIRE(server->publish("svc", svc));
  auto target = reach("svc");
  auto lone = bytes_of(sys, make_error(errc::peer_error, "quit, please"));
  auto before = server_stats().protocol_errors;
  send_actor_message(target, lone);                 // asynchronous
  send_actor_message(target, lone, 7, request_mid); // a request
  expect_refusal(errc::serialization_failed, "error handler", before + 2);
  auto alive = call<int32_t>(sys, svc, int32_t{41});
  BOOST_REQUIRE_MESSAGE(alive, render(alive));
  BOOST_TEST(*alive == 42);
  caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
}

// A message a typed actor does not take is refused at the receiving node
// (an answer for a request, a counted violation either way): it never
// reaches CAF's default handler, which printed each whole.  What the
// interface takes goes through.
BOOST_AUTO_TEST_CASE(a_message_outside_a_typed_interface_is_refused) {
  auto typed = sys.spawn([]() -> adder::behavior_type {
    return {[](add_atom, int32_t a, int32_t b) { return a + b; }};
  });
  BOOST_REQUIRE(server->publish("adder", typed)); // a typed handle as it is
  auto target = reach("adder");
  auto before = server_stats().protocol_errors;
  send_actor_message(target, bytes_of(sys, std::string(3000, 'x')));
  // The right types under another atom: not in the interface either.
  auto sub = serialize_message(
      sys, caf::make_message(caf::atom("sub"), int32_t{2}, int32_t{3}));
  BOOST_REQUIRE(sub);
  send_actor_message(target, *sub, 7, request_mid);
  expect_refusal(errc::unexpected_message, "('sub',@i32,@i32)", before + 2);
  auto good = serialize_message(
      sys, caf::make_message(add_atom::value, int32_t{2}, int32_t{3}));
  BOOST_REQUIRE(good);
  send_actor_message(target, *good, 7, request_mid + 1);
  auto answer = next_actor_message();
  BOOST_REQUIRE_MESSAGE(answer.second.match_elements<int32_t>(),
                        to_string(answer.second));
  BOOST_TEST(answer.second.get_as<int32_t>(0) == 5);
  BOOST_TEST(server_stats().protocol_errors == before + 2);
  caf::anon_send_exit(typed, caf::exit_reason::user_shutdown);
}

// An untyped actor with rdmactor's quiet default handler drops and counts
// what it does not handle (CAF's default printed 5,000 such messages,
// 14.9 MB, to stdout) and answers a request with unexpected_message.
BOOST_AUTO_TEST_CASE(drop_unexpected_counts_and_answers_what_nobody_handles) {
  auto svc = sys.spawn([](caf::event_based_actor* self) -> caf::behavior {
    self->set_default_handler(drop_unexpected);
    return {[](int32_t x) { return x + 1; }};
  });
  BOOST_REQUIRE(server->publish("svc", svc));
  auto target = reach("svc");
  auto before = unexpected_messages();
  auto text = bytes_of(sys, std::string(3000, 'x'));
  for (int i = 0; i < 20; ++i)
    send_actor_message(target, text);
  send_actor_message(target, text, 7, request_mid);
  auto err = next_error_answer();
  BOOST_TEST((err == caf::make_error(caf::sec::unexpected_message)),
             to_string(err));
  BOOST_TEST(unexpected_messages() == before + 21);
  auto alive = call<int32_t>(sys, svc, int32_t{1});
  BOOST_REQUIRE_MESSAGE(alive, render(alive));
  caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()
