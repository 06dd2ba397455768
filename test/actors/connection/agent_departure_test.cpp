#include <boost/test/unit_test.hpp>

// The suite `departure`: pending requests, memory and connections when a
// peer goes or closes.

#include <cstring>
#include <string>

#include "protocol/codec.hpp"
#include "test/actors/log_capture.hpp"
#include "test/support/agent_harness.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(departure)

namespace {

/// The client has the server allocate 1 MiB for it (AllocMR) and the
/// server lends the client 4 KiB (SendMR LOCAL); returns the client's
/// handle of the first.
remote_mr hold_memory_for_each_other(agent_harness& h) {
  auto rmr = h.call<remote_mr>(h.client_conn, request_remote_mr_atom::value,
                               uint64_t{1 << 20}, uint64_t{64});
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  auto lent = h.alloc(h.server_conn, 4096);
  BOOST_REQUIRE(h.call<mr_token>(h.server_conn, send_mr_atom::value, lent));
  return std::move(*rmr);
}

} // namespace

BOOST_AUTO_TEST_CASE(pending_requests_fail_and_memory_returns) {
  agent_harness h;
  // Memory held for and lent to the peer on both sides.
  auto rmr = hold_memory_for_each_other(h);
  BOOST_TEST(h.server.bytes_in_use() > 0u);
  // A user waits for data from the server and watches the connection.
  auto down = h.watch(h.client_conn);
  auto pending = h.ask<local_mr>(h.client_conn, receive_data_atom::value);
  h.settle();
  BOOST_REQUIRE(!pending->done);
  const auto start = h.now();
  // The peer goes away (a graceful close: Goodbye).
  caf::anon_send_exit(h.server_conn, caf::exit_reason::user_shutdown);
  h.server_conn = connection_actor{};
  h.settle();
  // Failed by the departure, not by a timeout: no time passed.
  BOOST_REQUIRE(pending->done);
  BOOST_TEST(!pending->values);
  BOOST_TEST(code_of(pending->error) == errc::closed, render(pending->error));
  BOOST_TEST((h.now() == start));
  BOOST_REQUIRE(down->down);
  BOOST_TEST(code_of(down->reason) == errc::peer_closed, render(down->reason));
  // Everything allocated on either side's behalf returns.
  rmr = remote_mr{};
  h.settle();
  BOOST_TEST(h.server.bytes_in_use() == 0u);
  BOOST_TEST(h.client.bytes_in_use() == 0u);
  // Requests after departure fail at once.
  auto late = h.call<remote_mr>(h.client_conn, request_remote_mr_atom::value,
                                uint64_t{64}, uint64_t{8});
  BOOST_TEST(!late);
}

// The agent plays the connection, and the transport holds it only weakly:
// when the last handle to a connection goes, the connection ends (its
// transport says Goodbye and closes the QP), the peer learns it was
// closed, and everything the connection held for its peer returns to the
// allocator.
BOOST_AUTO_TEST_CASE(dropping_the_last_handle_closes_the_connection) {
  agent_harness h;
  auto rmr = hold_memory_for_each_other(h);
  BOOST_TEST(h.server.bytes_in_use() >= (1u << 20) + 4096);
  auto down = h.watch(h.client_conn);
  h.server_conn = connection_actor{}; // the server's last handle
  // The agent's pending request sweep (a delayed message to itself, at
  // most 100 ms away) holds it until it fires.
  h.advance(100);
  BOOST_REQUIRE(down->down);
  // The dropped end said Goodbye: a close, not a failure.
  BOOST_TEST(code_of(down->reason) == errc::peer_closed, render(down->reason));
  BOOST_TEST(h.server.bytes_in_use() == 0u);
}

// Graceful close: the closer's Goodbye follows the data it posted before;
// the peer's end goes with peer_closed (no warning), its pending requests
// fail with closed, a remote_mr dropped on either side logs nothing, and
// both allocators get every byte back.
BOOST_AUTO_TEST_CASE(closing_a_connection_tells_the_peer) {
  log_capture logs;
  auto o = harness_options();
  o.log_level = "info";
  agent_harness h{o};
  auto rmr = hold_memory_for_each_other(h);
  BOOST_TEST(h.server.bytes_in_use() > 0u);
  // The 4 KiB the server lent waits in the client's queue: take it, to
  // drop it after the close below.
  auto lent = h.call<remote_mr>(h.client_conn, receive_remote_mr_atom::value);
  BOOST_REQUIRE_MESSAGE(lent, render(lent));
  auto sub = h.collector();
  BOOST_REQUIRE(
      h.call<uint64_t>(h.server_conn, subscribe_data_atom::value, sub.hdl));
  auto closer_down = h.watch(h.client_conn);
  auto peer_down = h.watch(h.server_conn);
  // The peer waits for a region that never comes.
  auto waiting = h.ask<local_mr>(h.server_conn, receive_local_mr_atom::value);
  // Data in flight, then the close, in mailbox order: the chunks the
  // closer posted reach the peer before its Goodbye.
  auto cm = o.max_message_len_bytes - protocol::max_frame_overhead;
  auto src = h.alloc(h.client_conn, 3 * cm);
  for (size_t i = 0; i < src.size(); ++i)
    src.data()[i] = static_cast<uint8_t>(5 + i * 31);
  auto sent = h.ask<uint64_t>(h.client_conn, send_data_atom::value, src);
  caf::anon_send_exit(h.client_conn, caf::exit_reason::user_shutdown);
  h.settle();
  BOOST_REQUIRE(peer_down->down);
  BOOST_TEST(code_of(peer_down->reason) == errc::peer_closed,
             render(peer_down->reason));
  BOOST_REQUIRE(closer_down->down);
  BOOST_TEST(code_of(closer_down->reason) == errc::closed,
             render(closer_down->reason));
  // The peer's pending request failed with closed.
  BOOST_REQUIRE(waiting->done);
  BOOST_TEST(code_of(waiting->error) == errc::closed, render(waiting->error));
  // The send_data's answer: closed (its chunks were not all acknowledged).
  BOOST_REQUIRE(sent->done);
  BOOST_TEST(code_of(sent->error) == errc::closed, render(sent->error));
  // Chunks posted before the Goodbye arrived, in order, intact.
  uint64_t off = 0;
  for (auto& chunk : *sub.chunks) {
    BOOST_REQUIRE(off + chunk.size() <= src.size());
    BOOST_TEST(std::memcmp(chunk.data(), src.data() + off, chunk.size()) == 0);
    off += chunk.size();
  }
  BOOST_TEST(off > 0u);
  sub.chunks->clear();
  // Dropping remote_mrs of a closed connection logs nothing.
  rmr = remote_mr{};
  *lent = remote_mr{};
  src = local_mr{};
  h.settle();
  BOOST_TEST(h.server.bytes_in_use() == 0u);
  BOOST_TEST(h.client.bytes_in_use() == 0u);
  BOOST_TEST(logs.lines->count(spdlog::level::warn) == 0u,
             logs.lines->dump(spdlog::level::warn));
  // A close is normal operation: said at debug level only.
  BOOST_TEST(logs.lines->count(spdlog::level::info, "closed by the peer")
             == 0u);
}

// Both ends closing at once: each says Goodbye, neither waits for the
// close timeout (no timer fires here), and nothing is logged as a failure.
BOOST_AUTO_TEST_CASE(both_ends_closing_at_once) {
  log_capture logs;
  auto o = harness_options();
  o.close_timeout_ms = 60000;
  agent_harness h{o};
  auto rmr = hold_memory_for_each_other(h);
  auto d1 = h.watch(h.client_conn);
  auto d2 = h.watch(h.server_conn);
  caf::anon_send_exit(h.client_conn, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(h.server_conn, caf::exit_reason::user_shutdown);
  h.settle();
  BOOST_REQUIRE(d1->down && d2->down);
  // Either closed here or by the peer's Goodbye, first come.
  for (auto& d : {d1->reason, d2->reason})
    BOOST_TEST((code_of(d) == errc::closed || code_of(d) == errc::peer_closed),
               render(d));
  rmr = remote_mr{};
  h.settle();
  BOOST_TEST(h.server.bytes_in_use() == 0u);
  BOOST_TEST(h.client.bytes_in_use() == 0u);
  BOOST_TEST(logs.lines->count(spdlog::level::warn) == 0u,
             logs.lines->dump(spdlog::level::warn));
}

// A link that fails (the peer's process died): both ends go with
// peer_gone and every byte held for the peer returns.
BOOST_AUTO_TEST_CASE(a_failed_link_ends_both_sides_with_peer_gone) {
  agent_harness h;
  auto rmr = hold_memory_for_each_other(h);
  auto d1 = h.watch(h.client_conn);
  auto d2 = h.watch(h.server_conn);
  auto pending = h.ask<local_mr>(h.client_conn, receive_data_atom::value);
  h.break_link();
  BOOST_REQUIRE(d1->down && d2->down);
  BOOST_TEST(code_of(d1->reason) == errc::peer_gone, render(d1->reason));
  BOOST_TEST(code_of(d2->reason) == errc::peer_gone, render(d2->reason));
  BOOST_REQUIRE(pending->done);
  BOOST_TEST(code_of(pending->error) == errc::peer_gone,
             render(pending->error));
  rmr = remote_mr{};
  h.client_conn = connection_actor{};
  h.server_conn = connection_actor{};
  h.settle();
  BOOST_TEST(h.server.bytes_in_use() == 0u);
  BOOST_TEST(h.client.bytes_in_use() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
