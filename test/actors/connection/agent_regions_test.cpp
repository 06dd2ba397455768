#include <boost/test/unit_test.hpp>

// The suite `regions`: memory regions lent, handed back, released and
// guarded by access rights and tags between two harnessed agents, and the
// data subscriptions that take what the peer sends.

#include <cstring>

#include "rdmactor/transport/fabric.hpp"
#include "test/support/agent_harness.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(regions)

namespace {

void fill(local_mr& mr, uint8_t seed) {
  for (size_t i = 0; i < mr.size(); ++i)
    mr.data()[i] = static_cast<uint8_t>(seed + i * 31);
}

/// Whether `mr` holds the pattern `fill(mr, seed)` wrote.
bool filled(const local_mr& mr, uint8_t seed) {
  for (size_t i = 0; i < mr.size(); ++i)
    if (mr.data()[i] != static_cast<uint8_t>(seed + i * 31))
      return false;
  return true;
}

bool same(const local_mr& a, const local_mr& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

} // namespace

BOOST_AUTO_TEST_CASE(send_mr_local_lends_memory_until_the_peer_releases) {
  agent_harness h;
  auto mr = h.alloc(h.client_conn, 8192);
  fill(mr, 42);
  auto tok = h.call<mr_token>(h.client_conn, send_mr_atom::value, mr);
  BOOST_REQUIRE_MESSAGE(tok, render(tok));
  BOOST_TEST((*tok == mr.token()));
  // Sending the same region again is refused, as in async-rdma.
  auto again = h.call<mr_token>(h.client_conn, send_mr_atom::value, mr);
  BOOST_REQUIRE(!again);
  BOOST_TEST(code_of(again.error()) == errc::already_sent);
  {
    auto rmr = h.call<remote_mr>(h.server_conn, receive_remote_mr_atom::value);
    BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
    BOOST_TEST(rmr->size() == 8192u);
    auto dst = h.alloc(h.server_conn, 8192);
    auto n = h.call<uint64_t>(h.server_conn, read_atom::value, dst, *rmr);
    BOOST_REQUIRE_MESSAGE(n, render(n));
    BOOST_TEST(same(dst, mr));
    BOOST_TEST(h.stats(h.client_conn).owned_mrs == 1u);
  } // the server drops its handle: ReleaseMR goes to the client
  h.settle();
  BOOST_TEST(h.stats(h.client_conn).owned_mrs == 0u);
}

BOOST_AUTO_TEST_CASE(dropping_a_remote_mr_releases_the_peer_memory) {
  agent_harness h;
  auto before = h.server.bytes_in_use();
  {
    auto rmr = h.call<remote_mr>(h.client_conn, request_remote_mr_atom::value,
                                 uint64_t{3 << 20}, uint64_t{4096});
    BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
    BOOST_TEST(h.server.bytes_in_use() >= before + (3 << 20));
  }
  h.settle();
  BOOST_TEST(h.server.bytes_in_use() == before);
  // Explicit release answers with the released length.
  auto rmr = h.call<remote_mr>(h.client_conn, request_remote_mr_atom::value,
                               uint64_t{100}, uint64_t{8});
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  auto n = h.call<uint64_t>(h.client_conn, release_atom::value, *rmr);
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_TEST(*n == 100u);
  BOOST_TEST(h.server.bytes_in_use() == before);
  auto again = h.call<uint64_t>(h.client_conn, release_atom::value, *rmr);
  BOOST_REQUIRE(!again);
  BOOST_TEST(code_of(again.error()) == errc::already_sent);
}

BOOST_AUTO_TEST_CASE(a_read_only_region_is_read_but_not_written_by_the_peer) {
  agent_harness h;
  const auto before = h.server.bytes_in_use();
  {
    auto bad = h.call<local_mr>(h.client_conn, alloc_local_mr_atom::value,
                                uint64_t{64}, uint64_t{64}, uint32_t{1u << 20});
    BOOST_REQUIRE(!bad);
    BOOST_TEST(code_of(bad.error()) == errc::invalid_argument);
    // The server lends 4 KiB read-only.
    auto ro = h.call<local_mr>(h.server_conn, alloc_local_mr_atom::value,
                               uint64_t{4096}, uint64_t{64},
                               uint32_t{transport::access::remote_read});
    BOOST_REQUIRE_MESSAGE(ro, render(ro));
    fill(*ro, 11);
    auto tok = h.call<mr_token>(h.server_conn, send_mr_atom::value, *ro);
    BOOST_REQUIRE_MESSAGE(tok, render(tok));
    auto rmr = h.call<remote_mr>(h.client_conn, receive_remote_mr_atom::value);
    BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
    auto dst = h.alloc(h.client_conn, 4096);
    auto r = h.call<uint64_t>(h.client_conn, read_atom::value, dst, *rmr);
    BOOST_REQUIRE_MESSAGE(r, render(r));
    BOOST_TEST(same(dst, *ro));
    auto down = h.watch(h.client_conn);
    fill(dst, 99);
    auto w = h.call<uint64_t>(h.client_conn, write_atom::value, dst, *rmr);
    BOOST_REQUIRE(!w);
    BOOST_TEST(code_of(w.error()) == errc::remote_access_error,
               render(w.error()));
    BOOST_TEST(filled(*ro, 11)); // untouched
    // As on any reliable connection, the error ends it.
    BOOST_REQUIRE(down->down);
    BOOST_TEST(code_of(down->reason) == errc::peer_gone, render(down->reason));
  }
  h.settle();
  BOOST_TEST(h.server.bytes_in_use() == before);
}

BOOST_AUTO_TEST_CASE(tags_arrive_with_their_tokens) {
  agent_harness h;
  const auto before = h.client.bytes_in_use();
  {
    auto a = h.alloc(h.client_conn, 128);
    auto b = h.alloc(h.client_conn, 256);
    auto ta = h.call<mr_token>(h.client_conn, send_mr_atom::value, a,
                               uint64_t{0xfeedbeefcafe});
    BOOST_REQUIRE_MESSAGE(ta, render(ta));
    auto tb = h.call<mr_token>(h.client_conn, send_mr_atom::value, b);
    BOOST_REQUIRE_MESSAGE(tb, render(tb));
    auto ra = h.call<remote_mr, uint64_t>(h.server_conn,
                                          receive_tagged_remote_mr_atom::value);
    BOOST_REQUIRE_MESSAGE(ra, render(ra));
    auto rb = h.call<remote_mr, uint64_t>(h.server_conn,
                                          receive_tagged_remote_mr_atom::value);
    BOOST_REQUIRE_MESSAGE(rb, render(rb));
    BOOST_TEST(std::get<1>(*ra) == 0xfeedbeefcafeu);
    BOOST_TEST((std::get<0>(*ra).token() == *ta));
    BOOST_TEST(std::get<1>(*rb) == 0u); // untagged
    BOOST_TEST((std::get<0>(*rb).token() == *tb));
    // The tag of a region handed back; the untagged receive call takes a
    // tagged one too.
    auto back = h.call<mr_token>(h.server_conn, send_mr_atom::value,
                                 std::get<0>(*ra), uint64_t{7});
    BOOST_REQUIRE_MESSAGE(back, render(back));
    auto back_b = h.call<mr_token>(h.server_conn, send_mr_atom::value,
                                   std::get<0>(*rb), uint64_t{8});
    BOOST_REQUIRE_MESSAGE(back_b, render(back_b));
    auto mine = h.call<local_mr, uint64_t>(h.client_conn,
                                           receive_tagged_local_mr_atom::value);
    BOOST_REQUIRE_MESSAGE(mine, render(mine));
    BOOST_TEST(std::get<1>(*mine) == 7u);
    BOOST_TEST((std::get<0>(*mine).token() == a.token()));
    auto plain = h.call<local_mr>(h.client_conn, receive_local_mr_atom::value);
    BOOST_REQUIRE_MESSAGE(plain, render(plain));
    BOOST_TEST((plain->token() == b.token()));
  }
  h.settle();
  BOOST_TEST(h.client.bytes_in_use() == before);
}

// The agent learns of a subscriber's end by its monitor: the chunks after
// that queue for receive_data again.
BOOST_AUTO_TEST_CASE(a_subscriber_that_terminates_ends_its_subscription) {
  agent_harness h;
  auto sub = h.collector();
  auto n = h.call<uint64_t>(h.server_conn, subscribe_data_atom::value, sub.hdl);
  BOOST_REQUIRE_MESSAGE(n, render(n));
  auto gone = h.watch(sub.hdl);
  caf::anon_send_exit(sub.hdl, caf::exit_reason::kill);
  sub.hdl = data_subscriber{};
  h.settle();
  BOOST_REQUIRE(gone->down);
  auto src = h.alloc(h.client_conn, 100);
  fill(src, 7);
  auto sent = h.call<uint64_t>(h.client_conn, send_data_atom::value, src);
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  BOOST_TEST(h.stats(h.server_conn).queued_data == 1u);
  BOOST_TEST(sub.chunks->empty());
  auto got = h.call<local_mr>(h.server_conn, receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(got, render(got));
  BOOST_TEST(same(*got, src));
}

BOOST_AUTO_TEST_CASE(subscribing_fails_waiting_receive_calls) {
  agent_harness h;
  auto waiting = h.ask<local_mr>(h.server_conn, receive_data_atom::value);
  h.settle();
  BOOST_REQUIRE(!waiting->done);
  auto sub = h.collector();
  auto n = h.call<uint64_t>(h.server_conn, subscribe_data_atom::value, sub.hdl);
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_REQUIRE(waiting->done);
  BOOST_TEST(!waiting->values);
  BOOST_TEST(code_of(waiting->error) == errc::invalid_argument,
             render(waiting->error));
}

BOOST_AUTO_TEST_SUITE_END()
