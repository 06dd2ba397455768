#include <boost/test/unit_test.hpp>

// The agent suite `peer_claims`: memory a node allocates for its peer,
// counted against peer-max-claim-bytes.

#include <cstring>
#include <string>

#include "test/actors/agent_helpers.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

// Memory a node allocates because its peer asked (to read what the peer
// lends, whatever length it claims) is counted per connection against
// peer-max-claim-bytes while any handle to it lives.
BOOST_AUTO_TEST_SUITE(peer_claims)

namespace {

options claim_options(uint64_t budget) {
  auto o = test_options();
  o.peer_max_claim_bytes = budget;
  return o;
}

caf::expected<local_mr> alloc_for_peer(two_nodes& t, const connection_actor& c,
                                       uint64_t size) {
  return call<local_mr>(t.sys, c, alloc_for_peer_atom::value, size,
                        uint64_t{64});
}

uint64_t claimed(two_nodes& t, const connection_actor& c) {
  auto s = call<agent_stats>(t.sys, c, stats_atom::value);
  BOOST_REQUIRE_MESSAGE(s, render(s));
  return s->peer_claim_bytes;
}

/// The client lends the server `size` bytes with a pattern (SendMR LOCAL);
/// returns the server's handle and keeps the client's in `lent`.
remote_mr lend_to_server(two_nodes& t, local_mr& lent, uint64_t size) {
  lent = alloc(t, t.client_conn, size);
  fill(lent, 7);
  BOOST_REQUIRE(
      call<mr_token>(t.sys, t.client_conn, send_mr_atom::value, lent));
  auto rmr
      = call<remote_mr>(t.sys, t.server_conn, receive_remote_mr_atom::value);
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  return std::move(*rmr);
}

} // namespace

BOOST_AUTO_TEST_CASE(within_the_budget_a_claim_is_read_and_counted) {
  two_nodes t{claim_options(256 * 1024)};
  const auto start = t.server->memory_stats().bytes_in_use;
  local_mr lent;
  auto rmr = lend_to_server(t, lent, 128 * 1024);
  {
    auto dst = alloc_for_peer(t, t.server_conn, rmr.size());
    BOOST_REQUIRE_MESSAGE(dst, render(dst));
    BOOST_TEST(dst->size() == 128u * 1024);
    BOOST_TEST(t.server->memory_stats().bytes_in_use == start + 128 * 1024);
    auto n = call<uint64_t>(t.sys, t.server_conn, read_atom::value, *dst, rmr);
    BOOST_REQUIRE_MESSAGE(n, render(n));
    BOOST_TEST(same(*dst, lent));
    BOOST_TEST(claimed(t, t.server_conn) == 128u * 1024);
    // A slice shares the block: still counted once.
    auto half = dst->slice(0, 1024);
    BOOST_REQUIRE(half);
    dst = local_mr{};
    BOOST_TEST(claimed(t, t.server_conn) == 128u * 1024);
  } // the last handle goes: the bytes return to the budget and the pool
  BOOST_TEST(eventually([&] { return claimed(t, t.server_conn) == 0; }));
  BOOST_TEST(t.server->memory_stats().bytes_in_use == start);
  BOOST_TEST(claimed(t, t.client_conn) == 0u);
}

BOOST_AUTO_TEST_CASE(over_the_budget_a_claim_is_refused_naming_the_option) {
  two_nodes t{claim_options(64 * 1024)};
  const auto start = t.server->memory_stats().bytes_in_use;
  // The peer lends more than the budget: nothing is allocated for it.
  local_mr lent;
  auto rmr = lend_to_server(t, lent, 128 * 1024);
  auto big = alloc_for_peer(t, t.server_conn, rmr.size());
  BOOST_REQUIRE(!big);
  BOOST_TEST(code_of(big.error()) == errc::quota_exceeded);
  BOOST_TEST_MESSAGE(render(big.error()));
  BOOST_TEST(render(big.error()).find("peer-max-claim-bytes=65536")
             != std::string::npos);
  BOOST_TEST(t.server->memory_stats().bytes_in_use == start);
  BOOST_TEST(claimed(t, t.server_conn) == 0u);
  // Claims add up: the budget in full, then not one byte more.
  auto first = alloc_for_peer(t, t.server_conn, 48 * 1024);
  BOOST_REQUIRE_MESSAGE(first, render(first));
  auto second = alloc_for_peer(t, t.server_conn, 16 * 1024);
  BOOST_REQUIRE_MESSAGE(second, render(second));
  auto third = alloc_for_peer(t, t.server_conn, 1);
  BOOST_REQUIRE(!third);
  BOOST_TEST(code_of(third.error()) == errc::quota_exceeded);
  BOOST_TEST(claimed(t, t.server_conn) == 64u * 1024);
  // Allocations of the app's own are not counted.
  BOOST_TEST(alloc(t, t.server_conn, 128 * 1024).size() == 128u * 1024);
  BOOST_TEST(claimed(t, t.server_conn) == 64u * 1024);
  // Dropping a region makes room again; the connection still works.
  first = local_mr{};
  BOOST_TEST(
      eventually([&] { return claimed(t, t.server_conn) == 16 * 1024; }));
  auto again = alloc_for_peer(t, t.server_conn, 48 * 1024);
  BOOST_REQUIRE_MESSAGE(again, render(again));
  auto n = call<uint64_t>(t.sys, t.server_conn, read_atom::value, *again,
                          *rmr.slice(0, 48 * 1024));
  BOOST_REQUIRE_MESSAGE(n, render(n));
  // Invalid layouts keep their own error and count nothing.
  auto bad = call<local_mr>(t.sys, t.server_conn, alloc_for_peer_atom::value,
                            uint64_t{64}, uint64_t{3});
  BOOST_REQUIRE(!bad);
  BOOST_TEST(code_of(bad.error()) == errc::invalid_layout);
  BOOST_TEST(claimed(t, t.server_conn) == 64u * 1024);
  second = local_mr{};
  again = local_mr{};
  BOOST_TEST(eventually([&] { return claimed(t, t.server_conn) == 0; }));
}

BOOST_AUTO_TEST_CASE(the_claim_budget_is_per_connection) {
  two_nodes t{claim_options(64 * 1024)};
  // Both ends of the first connection stay held: it stays open.
  auto first_client_conn = t.client_conn;
  auto first_server_conn = t.server_conn;
  t.connect(); // a second connection; t.server_conn is its server end
  BOOST_REQUIRE(t.server_conn != first_server_conn);
  auto full = alloc_for_peer(t, first_server_conn, 64 * 1024);
  BOOST_REQUIRE_MESSAGE(full, render(full));
  BOOST_TEST(!alloc_for_peer(t, first_server_conn, 64));
  // The other connection has its own budget.
  auto other = alloc_for_peer(t, t.server_conn, 64 * 1024);
  BOOST_REQUIRE_MESSAGE(other, render(other));
  BOOST_TEST(claimed(t, first_server_conn) == 64u * 1024);
  BOOST_TEST(claimed(t, t.server_conn) == 64u * 1024);
  other = local_mr{};
  BOOST_TEST(eventually([&] { return claimed(t, t.server_conn) == 0; }));
  BOOST_TEST(claimed(t, first_server_conn) == 64u * 1024);
}

BOOST_AUTO_TEST_CASE(a_claimed_region_outlives_its_connection_safely) {
  two_nodes t{claim_options(64 * 1024)};
  const auto start = t.server->memory_stats().bytes_in_use;
  auto held = alloc_for_peer(t, t.server_conn, 32 * 1024);
  BOOST_REQUIRE_MESSAGE(held, render(held));
  caf::scoped_actor watcher{t.sys};
  watcher->monitor(t.server_conn);
  caf::anon_send_exit(t.server_conn, caf::exit_reason::user_shutdown);
  t.server_conn = connection_actor{};
  bool down = false;
  watcher->receive([&](caf::down_msg&) { down = true; },
                   caf::after(std::chrono::seconds(10)) >> [] {});
  BOOST_TEST(down);
  // Still usable after the connection ended; dropped here, on this thread.
  std::memset(held->data(), 1, held->size());
  BOOST_TEST(t.server->memory_stats().bytes_in_use == start + 32 * 1024);
  held = local_mr{};
  BOOST_TEST(eventually(
      [&] { return t.server->memory_stats().bytes_in_use == start; }));
}

BOOST_AUTO_TEST_SUITE_END()
