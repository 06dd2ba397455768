// Large remote-actor messages by rendezvous (EXT_ACTOR_RENDEZVOUS): the
// receiver reads the serialization from the sender's memory in one RDMA
// READ.  Part of remote_actors_test (soft, and verbs through
// test/verbs/CMakeLists.txt).

#include <boost/test/unit_test.hpp>

#include <map>
#include <vector>

#include <caf/event_based_actor.hpp>

#include "test/actors/remote_actors_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

std::chrono::seconds rv_wait_time() {
  return std::chrono::seconds(30 * timeout_scale());
}

/// Options that offer rendezvous: eager frames of 4 KiB below 1 MiB.
options rendezvous_options() {
  auto o = test_options();
  o.max_message_len_bytes = 1 << 20;
  o.eager_message_len_bytes = 4096;
  return o;
}

agent_stats rv_stats(caf::actor_system& sys, const connection_actor& conn) {
  auto s = call<agent_stats>(sys, conn, stats_atom::value);
  BOOST_REQUIRE_MESSAGE(s, render(s));
  return *s;
}

byte_vector pattern(size_t n, uint8_t salt) {
  byte_vector v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>(i * 13 + salt);
  return v;
}

/// Checks the order of a sender's (seq) and (seq, bytes) messages; a
/// (seq, bytes) message must carry pattern(bytes.size(), seq).  Answers
/// `count` with how many arrived in order, -1 after any disorder or
/// damage.
caf::behavior mixed_checker(caf::event_based_actor*) {
  auto next = std::make_shared<int32_t>(0);
  auto ok = std::make_shared<bool>(true);
  return {
      [=](int32_t seq) {
        if (seq != (*next)++)
          *ok = false;
      },
      [=](int32_t seq, const byte_vector& v) {
        if (seq != (*next)++
            || v != pattern(v.size(), static_cast<uint8_t>(seq)))
          *ok = false;
      },
      [=](caf::atom_value) { return *ok ? *next : int32_t{-1}; },
  };
}

/// Waits until the pool of `n` holds `bytes` again (the sender frees a
/// serialization when the peer's answer arrives, a little after the
/// message's own answer).
bool pool_back_to(node& n, uint64_t bytes) {
  return eventually(
      [&] { return n.pool()->stats().bytes_in_use == bytes; },
      std::chrono::duration_cast<std::chrono::milliseconds>(rv_wait_time()));
}

} // namespace

BOOST_AUTO_TEST_CASE(large_messages_go_by_rendezvous_both_ways) {
  auto o = rendezvous_options();
  remote_nodes t{false, o};
  t.publish("service", t.server_sys.spawn(service));
  auto proxy = t.lookup("service");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  auto client_base = t.client->pool()->stats().bytes_in_use;
  auto server_base = t.server->pool()->stats().bytes_in_use;
  size_t large = 0;
  for (size_t n : {size_t{100}, size_t{4000}, size_t{5000}, size_t{100000},
                   size_t{1} << 20, size_t{3} << 20}) {
    auto v = pattern(n, static_cast<uint8_t>(n));
    auto size = call<uint64_t>(t.sys, *proxy, v);
    BOOST_REQUIRE_MESSAGE(size, n << ": " << render(size));
    BOOST_TEST(*size == n);
    // Both ways: the answer is the vector itself.
    auto back = call<byte_vector>(t.sys, *proxy, int32_t{0}, v);
    BOOST_REQUIRE_MESSAGE(back, n << ": " << render(back));
    BOOST_TEST((*back == v), n);
    if (n > 4096)
      ++large;
  }
  auto cs = rv_stats(t.sys, t.client_conn);
  auto ss = rv_stats(t.server_sys, t.server_conn);
  // Each large vector went twice from the client and once back.
  BOOST_TEST(cs.rendezvous_sent == 2 * large);
  BOOST_TEST(ss.rendezvous_read == 2 * large);
  BOOST_TEST(ss.rendezvous_sent == large);
  BOOST_TEST(cs.rendezvous_read == large);
  // Every serialization and every read buffer went back to the pools.
  BOOST_TEST(pool_back_to(*t.client, client_base));
  BOOST_TEST(pool_back_to(*t.server, server_base));
}

BOOST_AUTO_TEST_CASE(small_and_large_messages_keep_their_order) {
  auto o = rendezvous_options();
  remote_nodes t{false, o};
  t.publish("checker", t.server_sys.spawn(mixed_checker));
  auto proxy = t.lookup("checker");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  constexpr int32_t total = 600;
  caf::scoped_actor self{t.sys};
  auto target = *proxy;
  auto me = caf::actor{self};
  t.sys.spawn([=](caf::event_based_actor* s) {
    for (int32_t seq = 0; seq < total; ++seq) {
      // Every third one large (rendezvous), a few of them small enough
      // for one frame, the rest eager.
      if (seq % 3 == 0)
        s->send(target, seq,
                pattern(seq % 2 == 0 ? 20000 + seq : 1000,
                        static_cast<uint8_t>(seq)));
      else
        s->send(target, seq);
    }
    s->request(target, rv_wait_time(), caf::atom("count"))
        .then([=](int32_t n) { s->send(me, n); },
              [=](caf::error&) { s->send(me, int32_t{-2}); });
  });
  self->receive([&](int32_t n) { BOOST_TEST(n == total); },
                caf::after(rv_wait_time()) >>
                    [] { BOOST_FAIL("the sender did not finish"); });
  BOOST_TEST(rv_stats(t.sys, t.client_conn).rendezvous_sent == 100u);
}

BOOST_AUTO_TEST_CASE(rendezvous_messages_over_the_receivers_limit_are_refused) {
  auto o = rendezvous_options();
  o.actor_max_message_bytes = 1 << 20;
  auto so = o;
  so.actor_max_message_bytes = 64 * 1024; // the server takes less
  remote_nodes t{false, o, so};
  t.publish("service", t.server_sys.spawn(service));
  auto proxy = t.lookup("service");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  auto client_base = t.client->pool()->stats().bytes_in_use;
  // Over the receiver's limit: refused before it is read; the sender's
  // request fails with the reason.
  auto r = call<uint64_t>(t.sys, *proxy, byte_vector(100000));
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::size_limit, render(r.error()));
  BOOST_TEST(rv_stats(t.server_sys, t.server_conn).rendezvous_read == 0u);
  // Within both: served, and the connection is fine.
  auto r2 = call<uint64_t>(t.sys, *proxy, byte_vector(60000));
  BOOST_REQUIRE_MESSAGE(r2, render(r2));
  BOOST_TEST(*r2 == 60000u);
  BOOST_TEST(pool_back_to(*t.client, client_base));
}

BOOST_AUTO_TEST_CASE(a_peer_without_actor_rendezvous_gets_chunks) {
  // The client does not offer rendezvous (eager size = max message
  // length): the server sends it chunks, and it still reads from the
  // server, which offers it.
  auto o = test_options();
  auto so = rendezvous_options();
  remote_nodes t{false, o, so};
  t.publish("service", t.server_sys.spawn(service));
  auto proxy = t.lookup("service");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  auto v = pattern(100000, 7);
  auto back = call<byte_vector>(t.sys, *proxy, int32_t{0}, v);
  BOOST_REQUIRE_MESSAGE(back, render(back));
  BOOST_TEST((*back == v));
  BOOST_TEST(rv_stats(t.sys, t.client_conn).rendezvous_sent == 1u);
  BOOST_TEST(rv_stats(t.server_sys, t.server_conn).rendezvous_sent == 0u);
}
