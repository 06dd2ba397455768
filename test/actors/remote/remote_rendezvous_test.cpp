#include <boost/test/unit_test.hpp>

// The suite `rendezvous`: large remote-actor messages by rendezvous
// (EXT_ACTOR_RENDEZVOUS): the receiver reads the serialization from the
// sender's registered memory in one RDMA READ, here the wired fake link's.

#include <vector>

#include <caf/event_based_actor.hpp>

#include "test/actors/remote/harnessed_nodes.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(rendezvous)

namespace {

/// Options that offer rendezvous: eager frames of 4 KiB below 1 MiB.
options rendezvous_options() {
  auto o = harness_options();
  o.max_message_len_bytes = 1 << 20;
  o.eager_message_len_bytes = 4096;
  return o;
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

} // namespace

BOOST_AUTO_TEST_CASE(large_messages_go_by_rendezvous_both_ways) {
  harnessed_nodes t{rendezvous_options()};
  t.publish("service", t.spawn(t.server, service));
  auto proxy = t.proxy_of("service");
  auto client_base = t.client.bytes_in_use();
  auto server_base = t.server.bytes_in_use();
  uint64_t large = 0;
  for (size_t n : {size_t{100}, size_t{4000}, size_t{5000}, size_t{100000},
                   size_t{1} << 20, size_t{3} << 20}) {
    auto v = pattern(n, static_cast<uint8_t>(n));
    auto size = t.call<uint64_t>(proxy, v);
    BOOST_REQUIRE_MESSAGE(size, n << ": " << render(size));
    BOOST_TEST(*size == n);
    // Both ways: the answer is the vector itself.
    auto back = t.call<byte_vector>(proxy, int32_t{0}, v);
    BOOST_REQUIRE_MESSAGE(back, n << ": " << render(back));
    BOOST_TEST((*back == v), n);
    if (n > 4096)
      ++large;
    // Settled: every serialization and every read buffer is back in the
    // pools (the sender frees one when the peer's answer arrives).
    BOOST_TEST(t.client.bytes_in_use() == client_base, n);
    BOOST_TEST(t.server.bytes_in_use() == server_base, n);
  }
  auto cs = t.stats(t.client_conn);
  auto ss = t.stats(t.server_conn);
  // Each large vector went twice from the client and once back.
  BOOST_TEST(cs.rendezvous_sent == 2 * large);
  BOOST_TEST(ss.rendezvous_read == 2 * large);
  BOOST_TEST(ss.rendezvous_sent == large);
  BOOST_TEST(cs.rendezvous_read == large);
}

BOOST_AUTO_TEST_CASE(small_and_large_messages_keep_their_order) {
  harnessed_nodes t{rendezvous_options()};
  t.publish("checker", t.spawn(t.server, mixed_checker));
  auto proxy = t.proxy_of("checker");
  constexpr int32_t total = 600;
  for (int32_t seq = 0; seq < total; ++seq) {
    // Every third one large (rendezvous), a few of them small enough for
    // one frame, the rest eager.
    if (seq % 3 == 0)
      caf::anon_send(proxy, seq,
                     pattern(seq % 2 == 0 ? 20000 + seq : 1000,
                             static_cast<uint8_t>(seq)));
    else
      caf::anon_send(proxy, seq);
  }
  // Behind them on the connection.
  auto n = t.call<int32_t>(proxy, caf::atom("count"));
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_TEST(*n == total);
  BOOST_TEST(t.stats(t.client_conn).rendezvous_sent == 100u);
  BOOST_TEST(t.stats(t.server_conn).rendezvous_read == 100u);
}

BOOST_AUTO_TEST_CASE(rendezvous_messages_over_the_receivers_limit_are_refused) {
  auto o = rendezvous_options();
  o.actor_max_message_bytes = 1 << 20;
  auto so = o;
  so.actor_max_message_bytes = 64 * 1024; // the server takes less
  harnessed_nodes t{o, so};
  t.publish("service", t.spawn(t.server, service));
  auto proxy = t.proxy_of("service");
  auto client_base = t.client.bytes_in_use();
  // Over the receiver's limit: refused before it is read; the sender's
  // request fails with the reason.
  auto r = t.call<uint64_t>(proxy, byte_vector(100000));
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::size_limit, render(r.error()));
  BOOST_TEST(t.stats(t.server_conn).rendezvous_read == 0u);
  BOOST_TEST(t.client.bytes_in_use() == client_base);
  // Within both: served, and the connection is fine.
  auto r2 = t.call<uint64_t>(proxy, byte_vector(60000));
  BOOST_REQUIRE_MESSAGE(r2, render(r2));
  BOOST_TEST(*r2 == 60000u);
  BOOST_TEST(t.stats(t.server_conn).rendezvous_read == 1u);
  BOOST_TEST(t.client.bytes_in_use() == client_base);
}

BOOST_AUTO_TEST_CASE(a_peer_without_actor_rendezvous_gets_chunks) {
  // The client does not offer rendezvous (eager size = max message
  // length): the server sends it chunks, and it still reads from the
  // server, which offers it.
  harnessed_nodes t{harness_options(), rendezvous_options()};
  t.publish("service", t.spawn(t.server, service));
  auto proxy = t.proxy_of("service");
  auto v = pattern(100000, 7);
  auto back = t.call<byte_vector>(proxy, int32_t{0}, v);
  BOOST_REQUIRE_MESSAGE(back, render(back));
  BOOST_TEST((*back == v));
  auto cs = t.stats(t.client_conn);
  auto ss = t.stats(t.server_conn);
  BOOST_TEST(cs.rendezvous_sent == 1u);
  BOOST_TEST(ss.rendezvous_read == 1u);
  BOOST_TEST(ss.rendezvous_sent == 0u);
  BOOST_TEST(cs.rendezvous_read == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
