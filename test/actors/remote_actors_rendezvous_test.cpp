// Large remote-actor messages by rendezvous (EXT_ACTOR_RENDEZVOUS) on the
// fabric: the sender registers the serialization for the peer's read and
// the receiver reads it with one RDMA READ of the real queue pair (soft,
// and verbs through test/verbs/CMakeLists.txt).  Part of
// remote_actors_test.  The protocol around it (counts, order, limits,
// memory returned) is tested on the deterministic harness
// (test/actors/remote/remote_rendezvous_test.cpp).

#include <boost/test/unit_test.hpp>

#include <vector>

#include "test/actors/remote_actors_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_CASE(large_messages_are_read_from_the_senders_memory) {
  // Eager frames of 4 KiB below 1 MiB: rendezvous offered both ways.
  auto o = test_options();
  o.max_message_len_bytes = 1 << 20;
  o.eager_message_len_bytes = 4096;
  remote_nodes t{false, o};
  t.publish("service", t.server_sys.spawn(service));
  auto proxy = t.lookup("service");
  BOOST_REQUIRE_MESSAGE(proxy, render(proxy));
  // One below the maximum message length, one above it.
  for (size_t n : {size_t{100000}, size_t{3} << 20}) {
    byte_vector v(n);
    for (size_t i = 0; i < n; ++i)
      v[i] = static_cast<uint8_t>(i * 13 + n);
    // Both ways: the answer is the vector itself, read back by the client.
    auto back = call<byte_vector>(t.sys, *proxy, int32_t{0}, v);
    BOOST_REQUIRE_MESSAGE(back, n << ": " << render(back));
    BOOST_TEST((*back == v), n);
  }
  auto cs = call<agent_stats>(t.sys, t.client_conn, stats_atom::value);
  auto ss = call<agent_stats>(t.server_sys, t.server_conn, stats_atom::value);
  BOOST_REQUIRE(cs && ss);
  BOOST_TEST(cs->rendezvous_read == 2u);
  BOOST_TEST(ss->rendezvous_read == 2u);
}
