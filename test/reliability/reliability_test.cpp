#define BOOST_TEST_MODULE reliability
#include <boost/test/unit_test.hpp>

// The fault matrix (docs/reliability.md): a surviving node faces a peer
// that dies, drops the connection, corrupts frames, answers late, floods
// AllocMR or never answers.  For each case the suite checks what the
// survivor reports, that it keeps serving an established peer and new
// connections, and that its allocator returns to its starting byte count.
//
// Dying peers are real processes (reliability_peer, killed with SIGKILL or
// stopped with SIGSTOP); connection drops, corruption and delays are the
// soft fabric's fault injection (transport/soft/faults.hpp), so those cases
// run on soft only.  Run with --log_level=message to see each outcome.

#include <csignal>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include <caf/event_based_actor.hpp>

#include "test/reliability/survivor_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;
using namespace std::chrono_literals;

// -- peers that die or stop: real processes --------------------------------

BOOST_FIXTURE_TEST_SUITE(process_faults, survivor_fixture)

BOOST_AUTO_TEST_CASE(peer_killed_during_a_100_mib_write_stream_into_us) {
  auto peer = start_peer("stream-write", stream_bytes);
  auto conn = accept_next();
  watch w{sys, conn};
  BOOST_REQUIRE_MESSAGE(peer->wait_for("streaming", line_bound) != "",
                        "the peer did not start streaming ("
                            << peer->ended << "); it said: "
                            << (peer->lines.empty() ? std::string{"nothing"}
                                                    : peer->lines.back()));
  BOOST_TEST(survivor->memory_stats().bytes_in_use >= stream_bytes);
  // One write of 100 MiB went through; the next is under way.
  BOOST_REQUIRE_MESSAGE(peer->wait_for("wrote", line_bound) != "",
                        "the peer's first write did not complete");
  peer->kill();
  auto reason = expect_down(w, "peer killed writing 100 MiB into us");
  BOOST_TEST(code_of(reason) == errc::peer_gone);
  expect_memory_back(*survivor, "survivor");
  expect_serving("after the writer died");
}

BOOST_AUTO_TEST_CASE(peer_killed_while_we_write_100_mib_into_it) {
  auto peer = start_peer("lend", stream_bytes);
  auto conn = accept_next();
  watch w{sys, conn};
  BOOST_REQUIRE(peer->wait_for("lent", line_bound) != "");
  auto dst = call<remote_mr>(sys, conn, receive_remote_mr_atom::value);
  BOOST_REQUIRE_MESSAGE(dst, render(dst));
  auto src = call<local_mr>(sys, conn, alloc_local_mr_atom::value, stream_bytes,
                            uint64_t{64});
  BOOST_REQUIRE(src);
  fill(*src, 7);
  caf::scoped_actor self{sys};
  // Writes stay in flight while the peer dies: a window of them is always
  // outstanding and each success posts the next, from the first answer until
  // one fails.  A fixed batch was not enough: on a fast loopback all of it
  // completed before the kill landed (CI, TSan, 16 x 100 MiB).  The kill
  // runs on its own thread so that the window keeps moving while it lands.
  const int window = 4;
  const int max_writes = 64;
  int posted = 0;
  auto post = [&] {
    ++posted;
    self->send(conn, write_atom::value, *src, *dst);
  };
  for (int i = 0; i < window; ++i)
    post();
  std::map<std::string, int> seen;
  int received = 0;
  bool failed = false;
  std::thread killer;
  bool waiting = true;
  while (waiting && received < posted) {
    self->receive(
        [&](uint64_t) {
          ++received;
          ++seen["ok"];
          if (!failed && posted < max_writes)
            post();
        },
        [&](caf::error& err) {
          ++received;
          ++seen[outcome(err)];
          failed = true;
        },
        caf::after(down_bound) >> [&] { waiting = false; });
    // The first answer says the stream is under way: now the kill.
    if (received == 1 && !killer.joinable())
      killer = std::thread{[&peer] { peer->kill(); }};
  }
  if (killer.joinable())
    killer.join();
  BOOST_TEST(received == posted, "only " << received << " of " << posted
                                         << " writes were answered");
  std::ostringstream summary;
  for (auto& [what, n] : seen)
    summary << what << " x" << n << " ";
  BOOST_TEST_MESSAGE("writes into a killed peer: " << summary.str());
  BOOST_TEST(failed, "all " << posted << " writes succeeded although the "
                            << "peer was killed while they ran");
  auto reason = expect_down(w, "peer killed while we wrote into it");
  BOOST_TEST(code_of(reason) == errc::peer_gone);
  // Its region is gone with it; writing again fails at once.
  auto again = call<uint64_t>(sys, conn, write_atom::value, *src, *dst);
  BOOST_TEST(!again);
  BOOST_TEST(answered(again.error()), render(again.error()));
  *src = local_mr{};
  *dst = remote_mr{};
  expect_memory_back(*survivor, "survivor");
  expect_serving("after the target died");
}

BOOST_AUTO_TEST_CASE(peer_killed_during_a_send_data_of_many_chunks_to_us) {
  auto peer = start_peer("send-data", send_data_bytes);
  auto conn = accept_next();
  watch w{sys, conn};
  BOOST_REQUIRE(peer->wait_for("sending", line_bound) != "");
  // Claim the first chunk, then let the rest pile up.
  auto first = call<local_mr>(sys, conn, receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(first, render(first));
  BOOST_TEST(holds_pattern(*first, 3));
  BOOST_REQUIRE(eventually([&] { return stats_of(conn).queued_data >= 32; },
                           std::chrono::seconds(30)));
  peer->kill();
  auto reason = expect_down(w, "peer killed sending many chunks to us");
  BOOST_TEST(code_of(reason) == errc::peer_gone);
  // A chunk we claimed stays valid after its sender died.
  BOOST_TEST(holds_pattern(*first, 3));
  *first = local_mr{};
  expect_memory_back(*survivor, "survivor");
  expect_serving("after the sender died");
}

BOOST_AUTO_TEST_CASE(peer_killed_while_we_send_data_of_many_chunks_to_it) {
  auto peer = start_peer("idle", 0, 1);
  auto conn = accept_next();
  watch w{sys, conn};
  BOOST_REQUIRE(peer->wait_for("ready", line_bound) != "");
  // Stopped first, so that it stops granting credits and chunks queue up
  // on our side; then killed mid-message.
  BOOST_REQUIRE(peer->stop());
  auto src = call<local_mr>(sys, conn, alloc_local_mr_atom::value,
                            send_data_bytes, uint64_t{64});
  BOOST_REQUIRE(src);
  fill(*src, 9);
  caf::scoped_actor self{sys};
  self->send(conn, send_data_atom::value, *src);
  // Its first chunks went out and wait for the stopped peer's answers.
  BOOST_REQUIRE(eventually([&] { return stats_of(conn).pending_requests > 0; },
                           std::chrono::seconds(30)));
  peer->kill();
  caf::error result;
  bool got = false;
  self->receive([&](uint64_t) { got = true; },
                [&](caf::error& err) {
                  got = true;
                  result = err;
                },
                caf::after(down_bound) >> [] {});
  BOOST_REQUIRE_MESSAGE(got, "send_data was not answered");
  BOOST_TEST_MESSAGE("send_data to a killed peer: " << outcome(result));
  BOOST_TEST(code_of(result) != errc::none);
  auto reason = expect_down(w, "peer killed while we sent it many chunks");
  BOOST_TEST(code_of(reason) == errc::peer_gone);
  *src = local_mr{};
  expect_memory_back(*survivor, "survivor");
  expect_serving("after the receiver died");
}

BOOST_AUTO_TEST_CASE(peer_killed_while_holding_remote_mrs) {
  const uint64_t count = 8;
  const uint64_t bytes = 1 << 20;
  auto peer = start_peer("hold", bytes, count);
  auto conn = accept_next();
  watch w{sys, conn};
  BOOST_REQUIRE(peer->wait_for("holding", line_bound) != "");
  BOOST_TEST(survivor->memory_stats().bytes_in_use >= count * bytes);
  BOOST_TEST(stats_of(conn).owned_mrs == count);
  // We hold the regions it lent us, and use one.
  std::vector<remote_mr> lent;
  for (uint64_t i = 0; i < count; ++i) {
    auto r = call<remote_mr>(sys, conn, receive_remote_mr_atom::value);
    BOOST_REQUIRE_MESSAGE(r, render(r));
    lent.push_back(*r);
  }
  auto buf = call<local_mr>(sys, conn, alloc_local_mr_atom::value, bytes,
                            uint64_t{64});
  BOOST_REQUIRE(buf);
  auto w1 = call<uint64_t>(sys, conn, write_atom::value, *buf, lent[0]);
  BOOST_TEST(static_cast<bool>(w1), render(w1));
  peer->kill();
  auto reason = expect_down(w, "peer killed holding our memory and lending "
                               "its own");
  BOOST_TEST(code_of(reason) == errc::peer_gone);
  // Its regions are unusable now; using or dropping them is harmless.
  auto w2 = call<uint64_t>(sys, conn, write_atom::value, *buf, lent[1]);
  BOOST_TEST(!w2);
  BOOST_TEST(answered(w2.error()), render(w2.error()));
  BOOST_TEST_MESSAGE("write to a dead peer's region: " << outcome(w2.error()));
  lent.clear();
  *buf = local_mr{};
  expect_memory_back(*survivor, "survivor");
  expect_serving("after the holder died");
}

BOOST_AUTO_TEST_CASE(peer_that_floods_alloc_mr) {
  const uint64_t bytes = 1 << 20;
  auto peer = start_peer("flood-alloc", bytes);
  auto conn = accept_next();
  watch w{sys, conn};
  auto refused = peer->wait_for("refused", line_bound);
  BOOST_REQUIRE_MESSAGE(refused != "", "the flood was never refused");
  BOOST_TEST(refused == "refused " + std::to_string(opts.peer_max_mrs));
  BOOST_TEST(survivor->memory_stats().bytes_in_use
             <= opts.peer_max_alloc_bytes);
  auto end = peer->wait_for("disconnected", line_bound);
  BOOST_TEST_MESSAGE("AllocMR flood: peer saw '" << refused << "', then '"
                                                 << end << "'");
  BOOST_TEST(end != "");
  BOOST_TEST(peer->wait_exit(std::chrono::seconds(30)) == 0);
  auto reason = expect_down(w, "AllocMR flood");
  BOOST_TEST(code_of(reason) == errc::peer_gone);
  BOOST_TEST(render(reason).find("peer-max-violations") != std::string::npos);
  expect_memory_back(*survivor, "survivor");
  expect_serving("after the flood");
}

BOOST_AUTO_TEST_CASE(peer_that_never_answers) {
  auto peer = start_peer("idle", 0, 1);
  auto conn = accept_next();
  watch w{sys, conn};
  BOOST_REQUIRE(peer->wait_for("ready", line_bound) != "");
  // The keepalive starts with the peer's Hello (which says it answers
  // Pings): wait until the survivor has it, i.e. has pinged once (a peer
  // frozen before its Hello arrived is not pinged; docs/reliability.md).
  BOOST_REQUIRE(eventually([&] { return stats_of(conn).keepalive_pings >= 1; },
                           std::chrono::seconds(30 * timeout_scale())));
  BOOST_REQUIRE(peer->stop());
  auto started = std::chrono::steady_clock::now();
  auto r = call<remote_mr>(sys, conn, request_remote_mr_atom::value,
                           uint64_t{4096}, uint64_t{64});
  BOOST_REQUIRE(!r);
  auto answered_after = std::chrono::steady_clock::now() - started;
  BOOST_TEST_MESSAGE("request to a stopped peer: " << render(r.error()));
  // request_timeout after request-timeout-ms: from the agent, or (bug, see
  // answers_test.cpp) CAF's own from the agent's request to its transport.
  BOOST_TEST((answered_after
              < std::chrono::milliseconds(3 * opts.request_timeout_ms)));
  // The other peers do not wait for it.
  expect_serving("while a peer is stopped");
  // On verbs the frozen process's NIC (here: its kernel's rxe) still
  // acknowledges and takes messages into the receives posted before the
  // freeze, as an RDMA NIC does: the connection is alive at the transport
  // level, the requests time out, and the keepalive (an agent-level Ping
  // the frozen agent cannot answer, rdmactor.keepalive-ms) drops it; see
  // idle_stopped_peer_is_dropped_by_the_keepalive.
  auto reason = expect_down(w, "stopped peer");
  BOOST_TEST(code_of(reason) == errc::peer_gone);
  auto took = std::chrono::steady_clock::now() - started;
  BOOST_TEST_MESSAGE(
      "the stopped peer was dropped after "
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
      << " ms");
  peer->kill();
  expect_memory_back(*survivor, "survivor");
}

namespace {

/// Keepalive against a peer process with `n` idle connections to a
/// watcher (keepalive-ms 1000, scaled: at 300 a Pong held up by a loaded
/// machine could end a connection of the live peer before the stop, which
/// the test requires not to happen): pinged while it lives (at least
/// twice, on whichever connection pings for the peer node), every
/// connection dropped with `peer_gone` once it is stopped.
void stopped_idle_peer_is_dropped(survivor_fixture& f, int n) {
  auto o = f.opts;
  o.keepalive_ms = 1000 * timeout_scale();
  auto watcher = f.open(o);
  caf::scoped_actor acc{f.sys};
  auto p = watcher->listen(f.host + ":0", caf::actor_cast<caf::actor>(acc));
  BOOST_REQUIRE_MESSAGE(p, render(p));
  auto peer = std::make_unique<peer_process>(
      RDMACTOR_RELIABILITY_PEER,
      std::vector<std::string>{f.host + ":" + std::to_string(*p), "idle", "0",
                               std::to_string(n)});
  BOOST_REQUIRE(peer->started());
  std::vector<connection_actor> conns;
  std::vector<std::unique_ptr<watch>> watches;
  for (int i = 0; i < n; ++i) {
    connection_actor conn;
    acc->receive([&](accepted_atom, connection_actor& x) { conn = x; },
                 caf::after(std::chrono::seconds(30)) >> [] {});
    BOOST_REQUIRE_MESSAGE(conn, "connection " << i << " not accepted");
    watches.push_back(std::make_unique<watch>(f.sys, conn));
    conns.push_back(conn);
  }
  BOOST_REQUIRE(peer->wait_for("ready", line_bound) != "");
  auto pings = [&] {
    uint64_t sum = 0;
    for (auto& c : conns)
      sum += f.stats_of(c).keepalive_pings;
    return sum;
  };
  // Alive and idle: pinged, and it answers.
  BOOST_REQUIRE(eventually([&] { return pings() >= 2; },
                           std::chrono::seconds(30 * timeout_scale())));
  for (auto& w : watches)
    BOOST_REQUIRE(!w->down(std::chrono::milliseconds{0}));
  BOOST_REQUIRE(peer->stop());
  auto started = std::chrono::steady_clock::now();
  for (auto& w : watches) {
    auto reason = f.expect_down(*w, "idle stopped peer");
    BOOST_TEST(code_of(reason) == errc::peer_gone);
    BOOST_TEST(render(reason).find("keepalive") != std::string::npos,
               render(reason));
  }
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  BOOST_TEST_MESSAGE(n << " connection(s) of the idle stopped peer dropped "
                          "after "
                       << took.count() << " ms (keepalive-ms=" << o.keepalive_ms
                       << ")");
  peer->kill();
  f.expect_memory_back(*watcher, "watcher");
  watcher->close();
}

} // namespace

// Keepalive (issue 15): a peer process stopped (SIGSTOP) while the
// connection is idle is noticed within 2 x keepalive-ms (a Ping after
// keepalive-ms of silence, then keepalive-ms for any answer), on verbs too,
// where the stopped process's NIC still acknowledges.  The bound asserted
// is generous; the time it took is reported.
BOOST_AUTO_TEST_CASE(idle_stopped_peer_is_dropped_by_the_keepalive) {
  stopped_idle_peer_is_dropped(*this, 1);
}

// Keepalive watches peer nodes: a stopped peer process with several
// connections to the watcher costs one Ping per period while it lives and
// loses every connection within 2 x keepalive-ms once it stops (the one
// whose Ping goes unanswered and the others that waited for its answer).
BOOST_AUTO_TEST_CASE(every_connection_of_a_stopped_peer_is_dropped) {
  stopped_idle_peer_is_dropped(*this, 4);
}

BOOST_AUTO_TEST_SUITE_END()
