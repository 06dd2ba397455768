// Answers a user gets when the peer misbehaves at the protocol level, and
// what a connected peer can reach through the tokens it is given (the known
// gaps of docs/security.md).  A raw peer (raw_peer.hpp) plays the other side.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "test/reliability/raw_peer.hpp"
#include "test/reliability/reliability_options.hpp"
#include "transport/soft/faults.hpp"

using namespace rdmactor;
using namespace rdmactor::test;
using namespace std::chrono_literals;
namespace pb = rdmactor::protocol;

namespace {

/// A node, one raw peer connected to it, and the node's end of that
/// connection.
struct answers_fixture : system_holder {
  options opts = reliability_options();
  std::string host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
  std::unique_ptr<node> server;
  caf::scoped_actor acceptor{sys};
  uint16_t port = 0;
  std::unique_ptr<raw_peer> peer;
  connection_actor conn;

  answers_fixture() {
    opts.request_timeout_ms = 1500;
    auto s = node::open(sys, opts);
    BOOST_REQUIRE_MESSAGE(s, render(s));
    server = std::move(*s);
    auto p = server->listen(host + ":0", caf::actor_cast<caf::actor>(acceptor));
    BOOST_REQUIRE_MESSAGE(p, render(p));
    port = *p;
    peer = std::make_unique<raw_peer>(sys, opts, host, port);
    conn = accept();
  }

  ~answers_fixture() {
    peer.reset();
    server->close();
  }

  connection_actor accept() {
    connection_actor c;
    acceptor->receive([&](accepted_atom, connection_actor& x) { c = x; },
                      caf::after(10s) >> [] {});
    BOOST_REQUIRE_MESSAGE(c, "no connection accepted");
    return c;
  }

  /// A second node (the lender) connects with its outbound frames delayed
  /// 300 ms (soft fabric) and lends the server a 4096-byte region of 0xaa;
  /// the lender's agent keeps the region until the server releases it.
  struct lent_region {
    caf::expected<std::unique_ptr<node>> lender;
    caf::expected<connection_actor> conn; // the lender's end
    connection_actor here;                // the server's end
    caf::expected<remote_mr> src;
  };

  lent_region lend_delayed() {
    lent_region l{node::open(sys, opts), caf::error{}, {}, caf::error{}};
    BOOST_REQUIRE(l.lender);
    auto& dev = *(*l.lender)->device();
    transport::soft::fault_plan plan;
    plan.delay = 300ms;
    BOOST_REQUIRE(!transport::soft::set_faults(dev, plan));
    l.conn = (*l.lender)->connect(host + ":" + std::to_string(port));
    BOOST_REQUIRE(l.conn);
    BOOST_REQUIRE(!transport::soft::set_faults(dev, {}));
    l.here = accept();
    auto mr = call<local_mr>(sys, *l.conn, alloc_local_mr_atom::value,
                             uint64_t{4096}, uint64_t{64});
    BOOST_REQUIRE(mr);
    std::memset(mr->data(), 0xaa, 4096);
    BOOST_REQUIRE(call<mr_token>(sys, *l.conn, send_mr_atom::value, *mr));
    l.src = call<remote_mr>(sys, l.here, receive_remote_mr_atom::value);
    BOOST_REQUIRE(l.src);
    return l;
  }

  local_mr local(uint64_t size) {
    auto mr = call<local_mr>(sys, conn, alloc_local_mr_atom::value, size,
                             uint64_t{64});
    BOOST_REQUIRE_MESSAGE(mr, render(mr));
    return *mr;
  }
};

/// Returns true when `err` says what failed: an rdmactor code.
bool coded(const caf::error& err) {
  return static_cast<bool>(err) && code_of(err) != errc::none;
}

} // namespace

// Bugs the reliability work found (docs/reliability.md, "Findings"): each
// case failed before its fix.
BOOST_FIXTURE_TEST_SUITE(found_bugs, answers_fixture)

// A peer that answers SendMR or SendData with the body of another kind and
// status OK.  Expected: the call fails with an error that carries an
// rdmactor code (e.g. malformed_message), as AllocMR does.
BOOST_AUTO_TEST_CASE(an_answer_of_another_kind_fails_the_call_with_a_code) {
  caf::scoped_actor user{sys};
  auto mr = local(256);
  user->send(conn, send_mr_atom::value, mr);
  auto req = peer->next_request();
  BOOST_REQUIRE(req.has_send_mr());
  peer->send(pb::make_send_data_response(req.request_id(), pb::OK, ""));
  caf::error got;
  bool answered = false;
  user->receive([&](mr_token&) { answered = true; },
                [&](caf::error& err) {
                  answered = true;
                  got = err;
                },
                caf::after(10s) >> [] {});
  BOOST_REQUIRE(answered);
  BOOST_TEST(coded(got), "send_mr answered with a SendData response: "
                             << (got ? render(got) : "an empty error"));
  user->send(conn, send_data_atom::value, mr);
  auto req2 = peer->next_request();
  BOOST_REQUIRE(req2.has_send_data());
  peer->send(pb::make_send_mr_response(req2.request_id(), pb::OK, ""));
  answered = false;
  got = caf::error{};
  user->receive([&](uint64_t) { answered = true; },
                [&](caf::error& err) {
                  answered = true;
                  got = err;
                },
                caf::after(10s) >> [] {});
  BOOST_REQUIRE(answered);
  BOOST_TEST(coded(got), "send_data answered with a SendMR response: "
                             << (got ? render(got) : "an empty error"));
}

// A peer that stops granting credits (it keeps every receive buffer): our
// requests queue in the transport.  Expected: each call ends after
// request-timeout-ms with errc::request_timeout, not CAF's own error.
BOOST_AUTO_TEST_CASE(requests_stuck_without_credits_end_in_request_timeout) {
  caf::scoped_actor user{sys};
  const int calls = static_cast<int>(opts.recv_depth) + 4;
  for (int i = 0; i < calls; ++i)
    user->send(conn, request_remote_mr_atom::value, uint64_t{64}, uint64_t{8});
  int coded_errors = 0;
  int caf_errors = 0;
  for (int i = 0; i < calls; ++i)
    user->receive([&](remote_mr&) {},
                  [&](caf::error& err) {
                    if (coded(err))
                      ++coded_errors;
                    else
                      ++caf_errors;
                  },
                  caf::after(10s) >> [] {});
  BOOST_TEST_MESSAGE("calls without credits: " << coded_errors
                                               << " rdmactor errors, "
                                               << caf_errors << " CAF errors");
  BOOST_TEST(caf_errors == 0);
  BOOST_TEST(coded_errors == calls);
}

// Dropping a remote_mr while a read from it is in flight sends ReleaseMR
// behind the READ; the peer runs the release (and may reuse the memory)
// before its read response has left, so the read returns the new bytes.
// Here the lender's outbound frames are delayed 300 ms (soft fabric).
BOOST_AUTO_TEST_CASE(a_read_returns_the_bytes_of_the_region_it_read) {
  if (env_or("RDMACTOR_TEST_FABRIC", "soft") != "soft")
    return;
  auto l = lend_delayed();
  auto& lender = l.lender;
  auto& c = l.conn;
  auto& here = l.here;
  auto& src = l.src;
  auto dst = call<local_mr>(sys, here, alloc_local_mr_atom::value,
                            uint64_t{4096}, uint64_t{64});
  BOOST_REQUIRE(dst);
  caf::scoped_actor user{sys};
  user->send(here, read_atom::value, *dst, *src);
  *src = remote_mr{}; // the user is done with the region: ReleaseMR
  BOOST_REQUIRE(eventually([&] {
    auto s = call<agent_stats>(sys, *c, stats_atom::value);
    return s && s->owned_mrs == 0;
  }));
  // The lender reuses the memory it got back.
  auto reused = call<local_mr>(sys, *c, alloc_local_mr_atom::value,
                               uint64_t{4096}, uint64_t{64});
  BOOST_REQUIRE(reused);
  std::memset(reused->data(), 0xbb, 4096);
  bool done = false;
  user->receive([&](uint64_t) { done = true; }, [](caf::error&) {},
                caf::after(10s) >> [] {});
  BOOST_REQUIRE(done);
  BOOST_TEST(dst->data()[0] == 0xaa, "the read returned the bytes of the "
                                     "region's next owner");
  (*lender)->close();
}

// Closing a connection releases what it lent (and what the peer allocated)
// while its queue pair may still serve the peer: a READ arriving in that
// window reads memory that may have a new owner already.  The lender closes
// while the peer keeps reading and another thread keeps reusing the
// lender's memory; timing-dependent, so 50 rounds.
BOOST_AUTO_TEST_CASE(closing_a_lender_never_serves_reads_of_reused_memory) {
  int wrong = 0;
  int wrong_and_ok = 0;
  int rounds = 0;
  for (; rounds < 50; ++rounds) {
    auto lender = node::open(sys, opts);
    BOOST_REQUIRE(lender);
    auto c = (*lender)->connect(host + ":" + std::to_string(port));
    BOOST_REQUIRE(c);
    auto here = accept();
    {
      auto lent = call<local_mr>(sys, *c, alloc_local_mr_atom::value,
                                 uint64_t{4096}, uint64_t{64});
      BOOST_REQUIRE(lent);
      std::memset(lent->data(), 0xaa, 4096);
      BOOST_REQUIRE(call<mr_token>(sys, *c, send_mr_atom::value, *lent));
    }
    auto src = call<remote_mr>(sys, here, receive_remote_mr_atom::value);
    BOOST_REQUIRE(src);
    std::vector<local_mr> dsts;
    for (int i = 0; i < 8; ++i) {
      auto d = call<local_mr>(sys, here, alloc_local_mr_atom::value,
                              uint64_t{4096}, uint64_t{64});
      BOOST_REQUIRE(d);
      dsts.push_back(*d);
    }
    std::atomic<bool> stop{false};
    std::thread reuser([&] {
      while (!stop) {
        auto m = (*lender)->pool()->allocate(4096, 64, transport::access::all);
        if (m)
          std::memset(m->data(), 0xbb, 4096);
      }
    });
    // Every read's buffer is inspected as soon as its answer came, the
    // failed ones too: a READ pending when the lender's Goodbye arrives
    // is failed only after this side's transport has closed its queue
    // pair (the agent drains one-sided operations), so nothing lands in
    // the buffer after the answer.
    for (int i = 0; i < 8; ++i) {
      if (i == 4)
        caf::anon_send_exit(*c, caf::exit_reason::user_shutdown);
      auto r = call<uint64_t>(sys, here, read_atom::value, dsts[i], *src);
      if (dsts[i].data()[0] == 0xbb) {
        ++wrong;
        if (r)
          ++wrong_and_ok;
      }
    }
    stop = true;
    reuser.join();
    (*lender)->close();
  }
  BOOST_TEST(wrong == 0, wrong << " reads in " << rounds
                               << " rounds brought reused memory ("
                               << wrong_and_ok << " of them succeeded)");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(regressions, answers_fixture)

// A lender that closes its connection while the peer's READ of a lent
// region waits in its outbound queue (frames delayed 300 ms), then reuses
// the memory: the READ must fail, never return the new owner's bytes.
BOOST_AUTO_TEST_CASE(
    a_read_cut_by_the_lender_closing_never_returns_reused_bytes) {
  if (env_or("RDMACTOR_TEST_FABRIC", "soft") != "soft")
    return;
  auto l = lend_delayed();
  auto& lender = l.lender;
  auto& c = l.conn;
  auto& here = l.here;
  auto& src = l.src;
  auto dst = call<local_mr>(sys, here, alloc_local_mr_atom::value,
                            uint64_t{4096}, uint64_t{64});
  BOOST_REQUIRE(dst);
  caf::scoped_actor user{sys};
  user->send(here, read_atom::value, *dst, *src);
  // The READ reaches the lender: a SEND posted behind it (the lender
  // executes requests in order) has arrived once the lender holds its chunk.
  auto fence = call<local_mr>(sys, here, alloc_local_mr_atom::value,
                              uint64_t{64}, uint64_t{64});
  BOOST_REQUIRE(fence);
  caf::scoped_actor fencer{sys};
  fencer->send(here, send_data_atom::value, *fence);
  BOOST_REQUIRE(eventually([&] {
    auto s = call<agent_stats>(sys, *c, stats_atom::value);
    return s && s->queued_data > 0;
  }));
  // The lender closes the connection and reuses what it got back.
  caf::anon_send_exit(*c, caf::exit_reason::user_shutdown);
  BOOST_REQUIRE(
      eventually([&] { return (*lender)->memory_stats().bytes_in_use == 0; }));
  auto reused = (*lender)->pool()->allocate(4096, 64, transport::access::all);
  BOOST_REQUIRE(reused);
  std::memset(reused->data(), 0xbb, 4096);
  bool ok = false;
  user->receive([&](uint64_t) { ok = true; },
                [](caf::error& err) {
                  BOOST_TEST_MESSAGE("the read failed: " << render(err));
                },
                caf::after(10s) >> [] {});
  BOOST_TEST_MESSAGE("read ok: " << ok << ", first byte "
                                 << int{dst->data()[0]});
  BOOST_TEST((!ok || dst->data()[0] == 0xaa),
             "the read succeeded with the bytes of the memory's next owner");
  (*lender)->close();
}

// send_data of more chunks than peer-max-pending-requests goes through: the
// agent keeps a window of chunks in flight instead of failing the chunks
// over the limit after the first ones went out.
BOOST_AUTO_TEST_CASE(send_data_of_many_chunks_is_not_refused_by_its_own_limit) {
  auto o = opts;
  o.max_message_len_bytes = 4096;
  o.peer_max_pending_requests = 8;
  auto sender = node::open(sys, o);
  BOOST_REQUIRE(sender);
  auto c = (*sender)->connect(host + ":" + std::to_string(port));
  BOOST_REQUIRE(c);
  auto here = accept();
  const uint64_t bytes = 20 * 4000; // about 20 chunks
  auto mr = call<local_mr>(sys, *c, alloc_local_mr_atom::value, bytes,
                           uint64_t{64});
  BOOST_REQUIRE(mr);
  auto sent = call<uint64_t>(sys, *c, send_data_atom::value, *mr);
  BOOST_TEST(static_cast<bool>(sent), "send_data: " << render(sent));
  auto s = call<agent_stats>(sys, here, stats_atom::value);
  BOOST_REQUIRE(s);
  BOOST_TEST(s->queued_data_bytes == bytes);
  (*sender)->close();
}

BOOST_AUTO_TEST_SUITE_END()

// -- what a peer can reach: documented gaps --------------------------------
//
// These cases assert the exposure as it is, so docs/security.md stays true:
// when per-peer registrations (or memory windows) close a gap, its case
// fails and the document must change with it.

BOOST_FIXTURE_TEST_SUITE(known_gaps, answers_fixture)

BOOST_AUTO_TEST_CASE(regions_of_different_peers_share_one_rkey) {
  // The raw peer and a second, regular peer both allocate on the node.
  peer->send(pb::make_alloc_mr(1, 4096, 64));
  auto mine = peer->next_response();
  BOOST_REQUIRE(pb::status_of(mine) == pb::OK);
  auto other = node::open(sys, opts);
  BOOST_REQUIRE(other);
  auto c = (*other)->connect(host + ":" + std::to_string(port));
  BOOST_REQUIRE(c);
  auto other_end = accept();
  auto theirs = call<remote_mr>(sys, *c, request_remote_mr_atom::value,
                                uint64_t{4096}, uint64_t{64});
  BOOST_REQUIRE(theirs);
  auto secret = call<local_mr>(sys, *c, alloc_local_mr_atom::value,
                               uint64_t{4096}, uint64_t{64});
  BOOST_REQUIRE(secret);
  std::memset(secret->data(), 0x5e, 4096);
  BOOST_REQUIRE(call<uint64_t>(sys, *c, write_atom::value, *secret, *theirs));
  // Same registration: the raw peer's rkey opens the other peer's region.
  BOOST_TEST(theirs->token().rkey == mine.alloc_mr().token().rkey());
  auto dst = peer->pool->allocate(4096, 64, transport::access::local_write);
  BOOST_REQUIRE(dst);
  auto forged
      = mr_token{theirs->token().addr, 4096, mine.alloc_mr().token().rkey()};
  auto r = call<uint64_t>(sys, peer->tr, read_atom::value, *dst, forged);
  BOOST_REQUIRE_MESSAGE(
      r, "the read outside the peer's own region failed: " << render(r));
  BOOST_TEST(dst->data()[0] == 0x5e);
  BOOST_TEST(dst->data()[4095] == 0x5e);
  (*other)->close();
}

BOOST_AUTO_TEST_CASE(a_lent_region_exposes_every_user_allocation) {
  // The node's user allocates a private buffer and lends another one.
  auto priv = local(4096);
  std::memset(priv.data(), 0x77, priv.size());
  auto lent = local(4096);
  caf::scoped_actor user{sys};
  user->send(conn, send_mr_atom::value, lent);
  auto req = peer->next_request();
  BOOST_REQUIRE(req.has_send_mr());
  peer->send(pb::make_send_mr_response(req.request_id(), pb::OK, ""));
  bool sent = false;
  user->receive([&](mr_token&) { sent = true; }, [](caf::error&) {},
                caf::after(10s) >> [] {});
  BOOST_REQUIRE(sent);
  BOOST_TEST(priv.rkey() == lent.rkey());
  auto dst = peer->pool->allocate(4096, 64, transport::access::local_write);
  BOOST_REQUIRE(dst);
  auto forged = mr_token{priv.addr(), 4096, req.send_mr().token().rkey()};
  auto r = call<uint64_t>(sys, peer->tr, read_atom::value, *dst, forged);
  BOOST_REQUIRE_MESSAGE(r, render(r));
  BOOST_TEST(dst->data()[0] == 0x77);
}

BOOST_AUTO_TEST_CASE(unclaimed_data_is_dropped_when_the_sender_leaves) {
  pb::Message msg = pb::make_send_data(1, 100);
  std::vector<uint8_t> buf(pb::frame_header_len + msg.ByteSizeLong() + 100);
  auto enc
      = pb::encode(msg, buf.data(), buf.size(), opts.max_message_len_bytes);
  BOOST_REQUIRE(enc.code == errc::none);
  buf.resize(enc.header_len);
  auto payload = peer->pool->allocate(100, 8, transport::access::local_write);
  BOOST_REQUIRE(payload);
  BOOST_REQUIRE(call<uint64_t>(sys, peer->tr, transport::send_atom::value,
                               std::move(buf), *payload));
  // The sender got OK: the data is queued for our user.
  BOOST_REQUIRE(pb::status_of(peer->next_response()) == pb::OK);
  caf::scoped_actor watcher{sys};
  watcher->monitor(conn);
  peer.reset(); // the sender leaves before our user claimed the data
  watcher->receive([](caf::down_msg&) {}, caf::after(10s) >> [] {});
  auto got = call<local_mr>(sys, conn, receive_data_atom::value);
  BOOST_TEST(!got, "acknowledged data is now kept after the sender left");
}

BOOST_AUTO_TEST_CASE(a_token_outlives_its_release_and_the_connection) {
  peer->send(pb::make_alloc_mr(1, 4096, 64));
  auto res = peer->next_response();
  BOOST_REQUIRE(pb::status_of(res) == pb::OK);
  auto token = res.alloc_mr().token();
  peer->send(pb::make_release_mr(2, token));
  BOOST_REQUIRE(pb::status_of(peer->next_response()) == pb::OK);
  // The peer leaves and comes back on a new connection.
  peer.reset();
  peer = std::make_unique<raw_peer>(sys, opts, host, port);
  conn = accept();
  auto dst = peer->pool->allocate(4096, 64, transport::access::local_write);
  BOOST_REQUIRE(dst);
  auto stale = mr_token{token.addr(), 4096, token.rkey()};
  auto r = call<uint64_t>(sys, peer->tr, write_atom::value, *dst, stale);
  BOOST_TEST(static_cast<bool>(r),
             "a released token no longer works: " << render(r));
}

BOOST_AUTO_TEST_SUITE_END()

// Graceful close (issue 15) against peers that do or do not offer Goodbye
// in their Hello.
BOOST_FIXTURE_TEST_SUITE(graceful_close, answers_fixture)

// A peer that does not offer Goodbye (here: no Hello at all, as an agent
// before issue 15 would not offer it) gets none: its connection simply
// goes, at once, as before.
BOOST_AUTO_TEST_CASE(a_peer_that_offers_no_goodbye_gets_the_old_close) {
  caf::anon_send_exit(conn, caf::exit_reason::user_shutdown);
  auto kinds = peer->frames_until_down(10s);
  BOOST_REQUIRE(!kinds.empty());
  BOOST_TEST(kinds.back() == "down");
  BOOST_TEST(std::count(kinds.begin(), kinds.end(), "goodbye") == 0);
  peer.reset();
  BOOST_TEST(eventually(
      [&] { return server->memory_stats().bytes_in_use == 0; }, 20s));
}

// A peer that offers Goodbye gets one, last; the node keeps the queue pair
// until the peer closes its side (at most close-timeout-ms).
BOOST_AUTO_TEST_CASE(a_peer_that_offers_goodbye_gets_it_last) {
  auto hello = pb::make_hello(pb::protocol_version, opts.max_message_len_bytes,
                              opts.recv_depth, true);
  hello.mutable_hello()->set_goodbye(true);
  peer->send(hello);
  // The agent has our Hello once it answers a Ping sent behind it.
  peer->send(pb::make_ping(42));
  auto pong = peer->next_response();
  BOOST_TEST(pong.has_pong());
  BOOST_TEST(pong.request_id() == 42u);
  caf::anon_send_exit(conn, caf::exit_reason::user_shutdown);
  auto kinds = peer->frames_until_down(10s);
  BOOST_REQUIRE(!kinds.empty());
  auto bye = std::find(kinds.begin(), kinds.end(), "goodbye");
  BOOST_REQUIRE(bye != kinds.end());
  // Nothing but the end after it.
  BOOST_TEST((kinds.end() - bye <= 2));
  peer.reset(); // closes our side: the node's transport ends its wait
  BOOST_TEST(eventually(
      [&] { return server->memory_stats().bytes_in_use == 0; }, 20s));
}

BOOST_AUTO_TEST_SUITE_END()
