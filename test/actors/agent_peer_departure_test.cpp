#include <boost/test/unit_test.hpp>

// The agent suite `peer_departure`: pending requests, memory and
// connections when a peer goes, closes or idles.

#include <cstring>
#include <optional>
#include <string>

#include "test/actors/agent_helpers.hpp"
#include "test/actors/log_capture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(peer_departure)

namespace {

/// The client has the server allocate 1 MiB for it (AllocMR) and the
/// server lends the client 4 KiB (SendMR LOCAL); returns the client's
/// handle of the first.
remote_mr hold_memory_for_each_other(two_nodes& t) {
  auto rmr
      = call<remote_mr>(t.sys, t.client_conn, request_remote_mr_atom::value,
                        uint64_t{1 << 20}, uint64_t{64});
  BOOST_REQUIRE(rmr);
  auto lent = alloc(t, t.server_conn, 4096);
  BOOST_REQUIRE(
      call<mr_token>(t.sys, t.server_conn, send_mr_atom::value, lent));
  return std::move(*rmr);
}

} // namespace

BOOST_AUTO_TEST_CASE(pending_requests_fail_and_memory_returns) {
  auto o = test_options();
  o.request_timeout_ms = 20000;
  two_nodes t{o};
  // Memory held for and lent to the peer on both sides.
  auto rmr = hold_memory_for_each_other(t);
  BOOST_TEST(t.server->memory_stats().bytes_in_use > 0u);
  // A user waits for data from the server and watches the connection.
  caf::scoped_actor watcher{t.sys};
  watcher->monitor(t.client_conn);
  // In the agent's mailbox before the departure below can be.
  watcher->send(t.client_conn, receive_data_atom::value);
  auto start = std::chrono::steady_clock::now();
  t.server->close(); // the peer goes away (a graceful close: Goodbye)
  bool failed = false;
  watcher->receive([&](local_mr&) {},
                   [&](caf::error& err) {
                     failed = code_of(err) == errc::closed;
                     BOOST_TEST_MESSAGE("pending receive: " << render(err));
                   });
  // Failed by the departure (a timeout reads request_timeout), ...
  BOOST_TEST(failed);
  // ... promptly: before the request timeout (20 s) would have fired.
  BOOST_TEST(
      (std::chrono::steady_clock::now() - start < std::chrono::seconds(15)));
  watcher->receive([&](caf::down_msg& down) {
    BOOST_TEST(code_of(down.reason) == errc::peer_closed, render(down.reason));
  });
  // Everything allocated on either side's behalf returns.
  rmr = remote_mr{};
  BOOST_TEST(
      eventually([&] { return t.server->memory_stats().bytes_in_use == 0; }));
  BOOST_TEST(
      eventually([&] { return t.client->memory_stats().bytes_in_use == 0; }));
  // Requests after departure fail at once.
  auto late
      = call<remote_mr>(t.sys, t.client_conn, request_remote_mr_atom::value,
                        uint64_t{64}, uint64_t{8});
  BOOST_TEST(!late);
}

// The agent plays the connection, and the transport holds it only weakly:
// when the last handle to a connection goes, the connection ends (its
// transport says Goodbye and closes the QP), the peer learns it was
// closed, and everything the connection held for its peer returns to the
// allocator.
BOOST_AUTO_TEST_CASE(dropping_the_last_handle_closes_the_connection) {
  // A long request timeout: nothing may keep the connection open until a
  // timeout is due (CAF's clock holds requesters until their timeout).
  auto o = test_options();
  o.request_timeout_ms = 60000;
  two_nodes t{o};
  auto rmr = hold_memory_for_each_other(t);
  BOOST_TEST(t.server->memory_stats().bytes_in_use >= (1u << 20) + 4096);
  caf::scoped_actor watcher{t.sys};
  watcher->monitor(t.client_conn);
  t.server_conn = connection_actor{}; // the server's last handle
  bool down = false;
  watcher->receive(
      [&](caf::down_msg& msg) {
        down = true;
        // The dropped end said Goodbye: a close, not a failure.
        BOOST_TEST(code_of(msg.reason) == errc::peer_closed,
                   render(msg.reason));
      },
      caf::after(std::chrono::seconds(10)) >> [] {});
  BOOST_TEST(down);
  BOOST_TEST(
      eventually([&] { return t.server->memory_stats().bytes_in_use == 0; }));
}

namespace {

/// Waits up to `bound` for the down message of the actor `w` monitors.
std::optional<caf::error> down_reason(caf::scoped_actor& w,
                                      std::chrono::seconds bound) {
  std::optional<caf::error> out;
  w->receive([&](caf::down_msg& msg) { out = msg.reason; },
             caf::after(bound) >> [] {});
  return out;
}

} // namespace

// Graceful close (issue 15): the closer's Goodbye follows the data it
// posted before; the peer's end goes with peer_closed (an info line, no
// warning), its pending requests fail with closed, a remote_mr dropped on
// either side logs nothing, and both allocators get every byte back.
BOOST_AUTO_TEST_CASE(closing_a_connection_tells_the_peer) {
  log_capture logs; // before the nodes: the sink list is not thread-safe
  auto o = test_options();
  o.request_timeout_ms = 20000;
  o.log_level = "info";
  two_nodes t{o};
  auto rmr = hold_memory_for_each_other(t);
  BOOST_TEST(t.server->memory_stats().bytes_in_use > 0u);
  // The 4 KiB the server lent waits in the client's queue: take it, to
  // drop it after the close below.
  auto lent
      = call<remote_mr>(t.sys, t.client_conn, receive_remote_mr_atom::value);
  BOOST_REQUIRE_MESSAGE(lent, render(lent));
  caf::scoped_actor sub{t.sys};
  BOOST_REQUIRE(call<uint64_t>(t.sys, t.server_conn, subscribe_data_atom::value,
                               caf::actor_cast<data_subscriber>(sub)));
  caf::scoped_actor closer_watch{t.sys};
  closer_watch->monitor(t.client_conn);
  caf::scoped_actor peer_watch{t.sys};
  peer_watch->monitor(t.server_conn);
  // The peer waits for a region that never comes.
  caf::scoped_actor waiter{t.sys};
  waiter->send(t.server_conn, receive_local_mr_atom::value);
  // Data in flight, then the close, from one sender (mailbox order): the
  // chunks the closer posted reach the peer before its Goodbye.
  auto cm = chunk_max(t.opts);
  auto src = alloc(t, t.client_conn, 3 * cm);
  fill(src, 5);
  caf::scoped_actor closer{t.sys};
  closer->send(t.client_conn, send_data_atom::value, src);
  closer->send_exit(t.client_conn, caf::exit_reason::user_shutdown);
  auto peer_down = down_reason(peer_watch, std::chrono::seconds(20));
  BOOST_REQUIRE_MESSAGE(peer_down, "the peer's end did not go");
  BOOST_TEST(code_of(*peer_down) == errc::peer_closed, render(*peer_down));
  auto closer_down = down_reason(closer_watch, std::chrono::seconds(20));
  BOOST_REQUIRE(closer_down);
  BOOST_TEST(code_of(*closer_down) == errc::closed, render(*closer_down));
  // The peer's pending request failed with closed.
  bool failed_closed = false;
  waiter->receive([&](local_mr&) {},
                  [&](caf::error& err) {
                    failed_closed = code_of(err) == errc::closed;
                    BOOST_TEST_MESSAGE("pending at the peer: " << render(err));
                  },
                  caf::after(std::chrono::seconds(10)) >> [] {});
  BOOST_TEST(failed_closed);
  // The send_data's answer: closed (its chunks were not all acknowledged).
  closer->receive([](uint64_t) {},
                  [&](caf::error& err) {
                    BOOST_TEST(code_of(err) == errc::closed, render(err));
                  },
                  caf::after(std::chrono::seconds(10)) >>
                      [] { BOOST_FAIL("send_data was not answered"); });
  // Chunks posted before the Goodbye arrived, in order, intact.
  uint64_t off = 0;
  for (bool more = true; more;)
    sub->receive(
        [&](data_atom, local_mr& chunk) {
          BOOST_TEST(std::memcmp(chunk.data(), src.data() + off, chunk.size())
                     == 0);
          off += chunk.size();
        },
        caf::after(std::chrono::milliseconds(200)) >> [&] { more = false; });
  BOOST_TEST_MESSAGE("bytes the peer got before the Goodbye: " << off);
  BOOST_TEST(off > 0u);
  // Dropping remote_mrs of a closed connection logs nothing.
  rmr = remote_mr{};
  *lent = remote_mr{};
  src = local_mr{};
  BOOST_TEST(
      eventually([&] { return t.server->memory_stats().bytes_in_use == 0; }));
  BOOST_TEST(
      eventually([&] { return t.client->memory_stats().bytes_in_use == 0; }));
  BOOST_TEST(logs.lines->count(spdlog::level::warn) == 0u,
             logs.lines->dump(spdlog::level::warn));
  // A close is normal operation: said at debug level only.
  BOOST_TEST(logs.lines->count(spdlog::level::info, "closed by the peer")
             == 0u);
}

// Both ends closing at once: each says Goodbye, neither waits for the
// close timeout, and nothing is logged as a failure.
BOOST_AUTO_TEST_CASE(both_ends_closing_at_once) {
  log_capture logs;
  auto o = test_options();
  o.close_timeout_ms = 60000; // would show as a hang
  two_nodes t{o};
  auto rmr = hold_memory_for_each_other(t);
  caf::scoped_actor w1{t.sys};
  w1->monitor(t.client_conn);
  caf::scoped_actor w2{t.sys};
  w2->monitor(t.server_conn);
  caf::anon_send_exit(t.client_conn, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(t.server_conn, caf::exit_reason::user_shutdown);
  auto d1 = down_reason(w1, std::chrono::seconds(20));
  auto d2 = down_reason(w2, std::chrono::seconds(20));
  BOOST_REQUIRE(d1 && d2);
  // Either closed here or by the peer's Goodbye, first come.
  for (auto& d : {*d1, *d2})
    BOOST_TEST((code_of(d) == errc::closed || code_of(d) == errc::peer_closed),
               render(d));
  rmr = remote_mr{};
  // Each transport waits for the other's side or Goodbye, not 60 s.
  BOOST_TEST(eventually([&] {
    return t.server->memory_stats().bytes_in_use == 0
           && t.client->memory_stats().bytes_in_use == 0;
  }));
  BOOST_TEST(logs.lines->count(spdlog::level::warn) == 0u,
             logs.lines->dump(spdlog::level::warn));
}

// Keepalive (issue 15): an idle connection pings after keepalive-ms of
// silence and the peer's agent answers, so a live idle peer is never
// dropped; keepalive-ms=0 sends no pings.
BOOST_AUTO_TEST_CASE(keepalive_pings_an_idle_live_peer_and_zero_is_off) {
  auto pinging = test_options();
  pinging.keepalive_ms = 100;
  auto silent = test_options();
  silent.keepalive_ms = 0;
  system_holder server_side;
  auto server = node::open(server_side.sys, silent);
  auto client = node::open(server_side.sys, pinging);
  BOOST_REQUIRE(server && client);
  caf::scoped_actor acceptor{server_side.sys};
  auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
  auto port
      = (*server)->listen(host + ":0", caf::actor_cast<caf::actor>(acceptor));
  BOOST_REQUIRE_MESSAGE(port, render(port));
  auto conn = (*client)->connect(host + ":" + std::to_string(*port));
  BOOST_REQUIRE_MESSAGE(conn, render(conn));
  connection_actor server_end;
  acceptor->receive([&](accepted_atom, connection_actor& c) { server_end = c; },
                    caf::after(std::chrono::seconds(10)) >> [] {});
  BOOST_REQUIRE(server_end);
  caf::scoped_actor w{server_side.sys};
  w->monitor(*conn);
  auto stats = [&](const connection_actor& c) {
    auto s = call<agent_stats>(server_side.sys, c, stats_atom::value);
    return s ? *s : agent_stats{};
  };
  // Idle: the pinging end pings again and again, each Ping answered.
  BOOST_TEST(eventually([&] { return stats(*conn).keepalive_pings >= 5; },
                        std::chrono::seconds(30 * timeout_scale())));
  BOOST_TEST(stats(server_end).keepalive_pings == 0u);
  BOOST_TEST(stats(server_end).protocol_errors == 0u);
  BOOST_TEST(stats(*conn).protocol_errors == 0u);
  BOOST_TEST(!down_reason(w, std::chrono::seconds(0)));
  (*client)->close();
  (*server)->close();
}

BOOST_AUTO_TEST_SUITE_END()
