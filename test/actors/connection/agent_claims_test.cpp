#include <boost/test/unit_test.hpp>

// The suite `claims`: memory a connection allocates because its peer
// asked (to read what the peer lends, whatever length it claims), counted
// per connection against peer-max-claim-bytes while any handle to it
// lives.

#include <cstring>
#include <string>

#include "test/support/agent_harness.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(claims)

namespace {

options claim_options(uint64_t budget) {
  auto o = harness_options();
  o.peer_max_claim_bytes = budget;
  return o;
}

void fill(local_mr& mr, uint8_t seed) {
  for (size_t i = 0; i < mr.size(); ++i)
    mr.data()[i] = static_cast<uint8_t>(seed + i * 31);
}

bool same(const local_mr& a, const local_mr& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

caf::expected<local_mr>
alloc_for_peer(agent_harness& h, const connection_actor& c, uint64_t size) {
  return h.call<local_mr>(c, alloc_for_peer_atom::value, size, uint64_t{64});
}

uint64_t claimed(agent_harness& h, const connection_actor& c) {
  return h.stats(c).peer_claim_bytes;
}

/// The client lends the server `size` bytes with a pattern (SendMR LOCAL);
/// returns the server's handle and keeps the client's in `lent`.
remote_mr lend_to_server(agent_harness& h, local_mr& lent, uint64_t size) {
  lent = h.alloc(h.client_conn, size);
  fill(lent, 7);
  auto tok = h.call<mr_token>(h.client_conn, send_mr_atom::value, lent);
  BOOST_REQUIRE_MESSAGE(tok, render(tok));
  auto rmr = h.call<remote_mr>(h.server_conn, receive_remote_mr_atom::value);
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  return std::move(*rmr);
}

} // namespace

BOOST_AUTO_TEST_CASE(within_the_budget_a_claim_is_read_and_counted) {
  agent_harness h{claim_options(256 * 1024)};
  const auto start = h.server.bytes_in_use();
  local_mr lent;
  auto rmr = lend_to_server(h, lent, 128 * 1024);
  {
    auto dst = alloc_for_peer(h, h.server_conn, rmr.size());
    BOOST_REQUIRE_MESSAGE(dst, render(dst));
    BOOST_TEST(dst->size() == 128u * 1024);
    BOOST_TEST(h.server.bytes_in_use() == start + 128 * 1024);
    auto n = h.call<uint64_t>(h.server_conn, read_atom::value, *dst, rmr);
    BOOST_REQUIRE_MESSAGE(n, render(n));
    BOOST_TEST(same(*dst, lent));
    BOOST_TEST(claimed(h, h.server_conn) == 128u * 1024);
    // A slice shares the block: still counted once.
    auto half = dst->slice(0, 1024);
    BOOST_REQUIRE(half);
    dst = local_mr{};
    BOOST_TEST(claimed(h, h.server_conn) == 128u * 1024);
  } // the last handle goes: the bytes return to the budget and the pool
  h.settle();
  BOOST_TEST(claimed(h, h.server_conn) == 0u);
  BOOST_TEST(h.server.bytes_in_use() == start);
  BOOST_TEST(claimed(h, h.client_conn) == 0u);
}

BOOST_AUTO_TEST_CASE(over_the_budget_a_claim_is_refused_naming_the_option) {
  agent_harness h{claim_options(64 * 1024)};
  const auto start = h.server.bytes_in_use();
  // The peer lends more than the budget: nothing is allocated for it.
  local_mr lent;
  auto rmr = lend_to_server(h, lent, 128 * 1024);
  auto big = alloc_for_peer(h, h.server_conn, rmr.size());
  BOOST_REQUIRE(!big);
  BOOST_TEST(code_of(big.error()) == errc::quota_exceeded);
  BOOST_TEST(render(big.error()).find("peer-max-claim-bytes=65536")
             != std::string::npos);
  BOOST_TEST(h.server.bytes_in_use() == start);
  BOOST_TEST(claimed(h, h.server_conn) == 0u);
  // Claims add up: the budget in full, then not one byte more.
  auto first = alloc_for_peer(h, h.server_conn, 48 * 1024);
  BOOST_REQUIRE_MESSAGE(first, render(first));
  auto second = alloc_for_peer(h, h.server_conn, 16 * 1024);
  BOOST_REQUIRE_MESSAGE(second, render(second));
  auto third = alloc_for_peer(h, h.server_conn, 1);
  BOOST_REQUIRE(!third);
  BOOST_TEST(code_of(third.error()) == errc::quota_exceeded);
  BOOST_TEST(claimed(h, h.server_conn) == 64u * 1024);
  // Allocations of the app's own are not counted.
  BOOST_TEST(h.alloc(h.server_conn, 128 * 1024).size() == 128u * 1024);
  BOOST_TEST(claimed(h, h.server_conn) == 64u * 1024);
  // Dropping a region makes room again; the connection still works.
  first = local_mr{};
  h.settle();
  BOOST_TEST(claimed(h, h.server_conn) == 16u * 1024);
  auto again = alloc_for_peer(h, h.server_conn, 48 * 1024);
  BOOST_REQUIRE_MESSAGE(again, render(again));
  auto n = h.call<uint64_t>(h.server_conn, read_atom::value, *again,
                            *rmr.slice(0, 48 * 1024));
  BOOST_REQUIRE_MESSAGE(n, render(n));
  // Invalid layouts keep their own error and count nothing.
  auto bad = h.call<local_mr>(h.server_conn, alloc_for_peer_atom::value,
                              uint64_t{64}, uint64_t{3});
  BOOST_REQUIRE(!bad);
  BOOST_TEST(code_of(bad.error()) == errc::invalid_layout);
  BOOST_TEST(claimed(h, h.server_conn) == 64u * 1024);
  second = local_mr{};
  again = local_mr{};
  h.settle();
  BOOST_TEST(claimed(h, h.server_conn) == 0u);
}

BOOST_AUTO_TEST_CASE(the_claim_budget_is_per_connection) {
  agent_harness h{claim_options(64 * 1024)};
  // Both ends of the first connection stay held: it stays open.
  auto first_server_conn = h.server_conn;
  auto [client_conn, server_conn] = h.connect(); // a second connection
  BOOST_REQUIRE(server_conn != first_server_conn);
  auto full = alloc_for_peer(h, first_server_conn, 64 * 1024);
  BOOST_REQUIRE_MESSAGE(full, render(full));
  BOOST_TEST(!alloc_for_peer(h, first_server_conn, 64));
  // The other connection has its own budget.
  auto other = alloc_for_peer(h, server_conn, 64 * 1024);
  BOOST_REQUIRE_MESSAGE(other, render(other));
  BOOST_TEST(claimed(h, first_server_conn) == 64u * 1024);
  BOOST_TEST(claimed(h, server_conn) == 64u * 1024);
  other = local_mr{};
  h.settle();
  BOOST_TEST(claimed(h, server_conn) == 0u);
  BOOST_TEST(claimed(h, first_server_conn) == 64u * 1024);
}

BOOST_AUTO_TEST_CASE(a_claimed_region_outlives_its_connection_safely) {
  agent_harness h{claim_options(64 * 1024)};
  const auto start = h.server.bytes_in_use();
  auto held = alloc_for_peer(h, h.server_conn, 32 * 1024);
  BOOST_REQUIRE_MESSAGE(held, render(held));
  auto down = h.watch(h.server_conn);
  caf::anon_send_exit(h.server_conn, caf::exit_reason::user_shutdown);
  h.server_conn = connection_actor{};
  h.settle();
  BOOST_TEST(down->down);
  // Still usable after the connection ended; dropped here.
  std::memset(held->data(), 1, held->size());
  BOOST_TEST(h.server.bytes_in_use() == start + 32 * 1024);
  held = local_mr{};
  h.settle();
  BOOST_TEST(h.server.bytes_in_use() == start);
}

BOOST_AUTO_TEST_SUITE_END()
