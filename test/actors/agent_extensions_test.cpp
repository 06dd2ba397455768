// Memory-region leases (issue 15 item 6), on the fabric
// RDMACTOR_TEST_FABRIC names: they end by the clock.  (Immediate data,
// access rights, tags and connection ids: test/actors/connection/.)

#include <boost/test/unit_test.hpp>

#include <cstring>
#include <thread>

#include "test/actors/fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

void fill_with(local_mr& mr, uint8_t seed) {
  for (size_t i = 0; i < mr.size(); ++i)
    mr.data()[i] = static_cast<uint8_t>(seed + i * 13);
}

local_mr alloc_on(caf::actor_system& sys, const connection_actor& c,
                  uint64_t size) {
  auto mr
      = call<local_mr>(sys, c, alloc_local_mr_atom::value, size, uint64_t{64});
  BOOST_REQUIRE_MESSAGE(mr, render(mr));
  return *mr;
}

std::chrono::seconds wait_time() {
  return std::chrono::seconds(10 * timeout_scale());
}

} // namespace

BOOST_AUTO_TEST_SUITE(leases)

namespace {

/// Lends `size` bytes of the server's memory to the client with a lease;
/// the server keeps no handle of its own.
remote_mr lend_leased(two_nodes& t, uint64_t size, uint32_t lease_ms) {
  auto mr = alloc_on(t.server_side.sys, t.server_conn, size);
  auto tok = call<mr_token>(t.server_side.sys, t.server_conn,
                            send_mr_atom::value, mr, uint64_t{0}, lease_ms);
  BOOST_REQUIRE_MESSAGE(tok, render(tok));
  BOOST_TEST(tok->rkey != mr.rkey()); // a registration of its own
  auto rmr
      = call<remote_mr>(t.sys, t.client_conn, receive_remote_mr_atom::value);
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  return *rmr;
}

agent_stats server_stats(two_nodes& t) {
  auto s
      = call<agent_stats>(t.server_side.sys, t.server_conn, stats_atom::value);
  BOOST_REQUIRE(s);
  return *s;
}

/// Checks that the connection still serves: `src` reaches the server,
/// which refused nothing and saw no protocol error.
void expect_serving(two_nodes& t, const local_mr& src) {
  auto sent = call<uint64_t>(t.sys, t.client_conn, send_data_atom::value, src);
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  auto got = call<local_mr>(t.server_side.sys, t.server_conn,
                            receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(got, render(got));
  auto s = server_stats(t);
  BOOST_TEST(s.rejected_requests == 0u);
  BOOST_TEST(s.protocol_errors == 0u);
}

} // namespace

BOOST_AUTO_TEST_CASE(a_lease_ends_unless_renewed_and_the_memory_returns) {
  two_nodes t;
  const auto before = t.server->memory_stats().bytes_in_use;
  const uint32_t lease = 1000 * timeout_scale();
  auto rmr = lend_leased(t, 4096, lease);
  BOOST_TEST(t.server->memory_stats().bytes_in_use > before);
  auto src = alloc_on(t.sys, t.client_conn, 4096);
  fill_with(src, 5);
  // Renewed three times over more than the lease's duration: usable.
  for (int i = 0; i < 4; ++i) {
    auto w = call<uint64_t>(t.sys, t.client_conn, write_atom::value, src, rmr);
    BOOST_REQUIRE_MESSAGE(w, render(w));
    std::this_thread::sleep_for(std::chrono::milliseconds(lease / 3));
    auto granted = call<uint32_t>(t.sys, t.client_conn, renew_lease_atom::value,
                                  rmr, lease * 10);
    BOOST_REQUIRE_MESSAGE(granted, render(granted));
    BOOST_TEST(*granted == lease); // at most the original duration
  }
  BOOST_TEST(server_stats(t).leases_expired == 0u);
  // Not renewed: the server revokes it, and its memory returns although
  // the client still holds its remote_mr.
  BOOST_REQUIRE(eventually([&] { return server_stats(t).leases_expired == 1; },
                           std::chrono::milliseconds(lease * 5)));
  BOOST_TEST(eventually(
      [&] { return t.server->memory_stats().bytes_in_use == before; },
      wait_time()));
  auto w = call<uint64_t>(t.sys, t.client_conn, write_atom::value, src, rmr);
  BOOST_REQUIRE(!w);
  BOOST_TEST(code_of(w.error()) == errc::lease_expired, render(w.error()));
  auto r = call<uint32_t>(t.sys, t.client_conn, renew_lease_atom::value, rmr,
                          lease);
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::lease_expired, render(r.error()));
  // The connection goes on; dropping the handle sends nothing to release.
  rmr = remote_mr{};
  expect_serving(t, src);
  BOOST_TEST(server_stats(t).owned_mrs == 0u);
}

BOOST_AUTO_TEST_CASE(operations_in_flight_when_a_lease_ends) {
  two_nodes t;
  const auto before = t.server->memory_stats().bytes_in_use;
  const uint32_t lease = 1000 * timeout_scale();
  auto rmr = lend_leased(t, 64 * 1024, lease);
  auto src = alloc_on(t.sys, t.client_conn, 64 * 1024);
  // Four writers keep operations in flight until the lease ends; each ends
  // with lease_expired, and no operation meets a revoked registration.
  caf::scoped_actor self{t.sys};
  constexpr int writers = 4;
  int expired = 0;
  int ok = 0;
  for (int i = 0; i < writers; ++i)
    self->send(t.client_conn, write_atom::value, src, rmr);
  int other_errors = 0;
  while (expired < writers) {
    self->receive(
        [&](uint64_t) {
          ++ok;
          self->send(t.client_conn, write_atom::value, src, rmr);
        },
        [&](caf::error& e) {
          if (code_of(e) == errc::lease_expired)
            ++expired;
          else {
            ++other_errors;
            ++expired; // this writer stops
            BOOST_ERROR(render(e));
          }
        },
        caf::after(std::chrono::milliseconds(lease * 5)) >>
            [&] { BOOST_FAIL("no answer"); });
  }
  BOOST_TEST(ok > 0);
  BOOST_TEST(other_errors == 0);
  rmr = remote_mr{};
  BOOST_REQUIRE(eventually([&] { return server_stats(t).leases_expired == 1; },
                           std::chrono::milliseconds(lease * 5)));
  BOOST_TEST(eventually(
      [&] { return t.server->memory_stats().bytes_in_use == before; },
      wait_time()));
  // Still connected.
  auto sent = call<uint64_t>(t.sys, t.client_conn, send_data_atom::value, src);
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
}

BOOST_AUTO_TEST_CASE(atomics_and_send_backs_on_an_ended_lease_fail_locally) {
  // Every use of a remote_mr passes one gate (actors/core/remote_gate.hpp): an
  // atomic on a revoked region would otherwise reach the peer's fabric
  // with a dead rkey and end the connection.
  two_nodes t;
  const uint32_t lease = 1000 * timeout_scale();
  auto rmr = lend_leased(t, 64, lease);
  BOOST_REQUIRE(eventually([&] { return server_stats(t).leases_expired == 1; },
                           std::chrono::milliseconds(lease * 5)));
  auto fa = call<uint64_t>(t.sys, t.client_conn, fetch_add_atom::value, rmr,
                           uint64_t{1});
  BOOST_REQUIRE(!fa);
  BOOST_TEST(code_of(fa.error()) == errc::lease_expired, render(fa.error()));
  BOOST_TEST(render(fa.error()).find("fetch_add") != std::string::npos,
             render(fa.error()));
  auto cs = call<uint64_t>(t.sys, t.client_conn, compare_swap_atom::value, rmr,
                           uint64_t{0}, uint64_t{1});
  BOOST_REQUIRE(!cs);
  BOOST_TEST(code_of(cs.error()) == errc::lease_expired, render(cs.error()));
  auto back = call<mr_token>(t.sys, t.client_conn, send_mr_atom::value, rmr);
  BOOST_REQUIRE(!back);
  BOOST_TEST(code_of(back.error()) == errc::lease_expired,
             render(back.error()));
  // Nothing reached the server, and the connection still serves.
  expect_serving(t, alloc_on(t.sys, t.client_conn, 64));
}

BOOST_AUTO_TEST_CASE(a_lease_needs_memory_from_the_allocator) {
  two_nodes t;
  auto src = alloc_on(t.sys, t.client_conn, 100);
  BOOST_REQUIRE(
      call<uint64_t>(t.sys, t.client_conn, send_data_atom::value, src));
  auto chunk = call<local_mr>(t.server_side.sys, t.server_conn,
                              receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(chunk, render(chunk));
  auto tok
      = call<mr_token>(t.server_side.sys, t.server_conn, send_mr_atom::value,
                       *chunk, uint64_t{0}, uint32_t{1000});
  BOOST_REQUIRE(!tok);
  BOOST_TEST(code_of(tok.error()) == errc::invalid_argument,
             render(tok.error()));
}

BOOST_AUTO_TEST_CASE(regions_a_peer_allocates_carry_the_lenders_lease) {
  const uint32_t lease = 1000 * timeout_scale();
  auto server_opts = test_options();
  server_opts.peer_alloc_lease_ms = lease;
  two_nodes t{test_options(), server_opts};
  const auto before = t.server->memory_stats().bytes_in_use;
  auto rmr
      = call<remote_mr>(t.sys, t.client_conn, request_remote_mr_atom::value,
                        uint64_t{4096}, uint64_t{64});
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  auto src = alloc_on(t.sys, t.client_conn, 4096);
  auto w = call<uint64_t>(t.sys, t.client_conn, write_atom::value, src, *rmr);
  BOOST_REQUIRE_MESSAGE(w, render(w));
  auto granted = call<uint32_t>(t.sys, t.client_conn, renew_lease_atom::value,
                                *rmr, lease);
  BOOST_REQUIRE_MESSAGE(granted, render(granted));
  BOOST_TEST(*granted == lease);
  BOOST_TEST(server_stats(t).peer_alloc_bytes == 4096u);
  // Never released by the client: revoked and freed at the lease's end.
  BOOST_REQUIRE(eventually([&] { return server_stats(t).leases_expired == 1; },
                           std::chrono::milliseconds(lease * 5)));
  BOOST_TEST(server_stats(t).peer_alloc_bytes == 0u);
  BOOST_TEST(eventually(
      [&] { return t.server->memory_stats().bytes_in_use == before; },
      wait_time()));
  w = call<uint64_t>(t.sys, t.client_conn, write_atom::value, src, *rmr);
  BOOST_REQUIRE(!w);
  BOOST_TEST(code_of(w.error()) == errc::lease_expired, render(w.error()));
  auto rel = call<uint64_t>(t.sys, t.client_conn, release_atom::value, *rmr);
  BOOST_REQUIRE(!rel);
  BOOST_TEST(code_of(rel.error()) == errc::lease_expired);
  BOOST_TEST(server_stats(t).rejected_requests == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
