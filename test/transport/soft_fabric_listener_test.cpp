// Soft-fabric-only tests: hostile peers on the listening port and on a
// connection, two processes (a peer killed or stopped), fault injection and
// the soft fabric's documented choices.
//
// This file: the listener and strangers on the listening port.

#define BOOST_TEST_MODULE soft_fabric_test
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <csignal>
#include <deque>

#include "common/rate_limiter.hpp"
#include "common/tuning.hpp"
#include "test/actors/log_capture.hpp"
#include "test/transport/soft_fabric_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

/// Sends `n` bytes from client to server and checks they arrive.
void check_send_works(transport::device& dev, transport::queue_pair& from,
                      transport::queue_pair& to) {
  auto src = make_buffer(dev, 1000, 0);
  auto dst = make_buffer(dev, 1000, local_write);
  fill_pattern(src.data(), 1000, 1234);
  auto rsg = dst.whole();
  BOOST_REQUIRE(!to.post_recv(77, &rsg, 1));
  auto sg = src.whole();
  BOOST_REQUIRE(!from.post_send(78, &sg, 1));
  auto r = wait_completions(to, 1);
  BOOST_REQUIRE_EQUAL(r.size(), 1u);
  BOOST_TEST(r[0].status == wc_status::success);
  BOOST_TEST(has_pattern(dst.data(), 1000, 1234));
  auto s = wait_completions(from, 1);
  BOOST_REQUIRE_EQUAL(s.size(), 1u);
  BOOST_TEST(s[0].status == wc_status::success);
}

} // namespace

// -- the listener and strangers ----------------------------------------------

BOOST_AUTO_TEST_SUITE(listener)

BOOST_AUTO_TEST_CASE(garbage_and_wrong_version_do_not_stop_it) {
  auto dev = open_soft(soft_options());
  auto lst = value_or_throw(dev->listen("127.0.0.1", 0, {}), "listen");
  auto port = lst->port();
  auto garbage = raw_socket::connect(port);
  std::array<uint8_t, 64> junk{};
  fill_pattern(junk.data(), junk.size(), 5);
  garbage->write_all(junk.data(), junk.size());
  auto old = raw_socket::connect(port);
  std::array<uint8_t, wire::hello_size> hello{};
  auto h = default_hello();
  h.version = 99;
  wire::encode(h, hello.data());
  old->write_all(hello.data(), hello.size());
  transport::queue_pair_ptr client;
  std::array<uint8_t, wire::hello_size> answer{};
  bool answered = false;
  auto server = accept_while(
      *lst,
      [&] {
        // Both strangers are dealt with while accept waits: the one with
        // garbage is dropped without an answer, the old version learns ours
        // and is dropped.  Then a real client still gets through.
        BOOST_TEST(garbage->wait_closed(10s));
        answered = old->read_exact(answer.data(), answer.size(), 10s);
        BOOST_TEST(old->wait_closed(10s));
        client = value_or_throw(dev->connect("127.0.0.1", port, {}, 5s),
                                "connect");
      },
      30s);
  BOOST_REQUIRE(server);
  check_send_works(*dev, *client, *server);
  BOOST_REQUIRE(answered);
  wire::hello theirs;
  BOOST_TEST((wire::decode(answer.data(), theirs) == wire::hello_status::ok));
  BOOST_TEST(theirs.version == wire::version);
  // And it keeps serving.
  transport::queue_pair_ptr client2;
  auto server2 = accept_while(*lst, [&] {
    client2
        = value_or_throw(dev->connect("127.0.0.1", port, {}, 5s), "connect");
  });
  check_send_works(*dev, *client2, *server2);
}

BOOST_AUTO_TEST_CASE(silent_stranger_does_not_block_accept) {
  auto opts = soft_options();
  opts.connect_timeout_ms = 3000;
  auto dev = open_soft(opts);
  auto lst = value_or_throw(dev->listen("127.0.0.1", 0, {}), "listen");
  auto port = lst->port();
  auto stranger = raw_socket::connect(port);
  transport::queue_pair_ptr client;
  auto server = accept_while(*lst, [&] {
    client = value_or_throw(dev->connect("127.0.0.1", port, {}, 5s), "connect");
  });
  // Accepted while the stranger's handshake time still ran: accept did not
  // wait for it.
  BOOST_TEST(stranger->open_now());
  check_send_works(*dev, *client, *server);
  // The stranger is dropped once its handshake time is up (while accept
  // keeps running).
  auto res = lst->accept(5000ms);
  BOOST_TEST(code_of(res.error()) == errc::connect_timeout);
  BOOST_TEST(stranger->wait_closed(5s));
}

BOOST_AUTO_TEST_CASE(short_hello_then_silence_is_dropped) {
  auto opts = soft_options();
  opts.connect_timeout_ms = 300;
  auto dev = open_soft(opts);
  auto lst = value_or_throw(dev->listen("127.0.0.1", 0, {}), "listen");
  auto s = raw_socket::connect(lst->port());
  s->write_all(wire::magic.data(), 5);
  auto res = lst->accept(800ms);
  BOOST_TEST(!res);
  BOOST_TEST(s->wait_closed(100ms));
}

BOOST_AUTO_TEST_CASE(a_silent_stranger_learns_why_it_was_dropped) {
  auto opts = soft_options();
  opts.connect_timeout_ms = 300;
  auto dev = open_soft(opts);
  auto lst = value_or_throw(dev->listen("127.0.0.1", 0, {}), "listen");
  auto s = raw_socket::connect(lst->port());
  BOOST_TEST(!lst->accept(800ms));
  BOOST_TEST((s->read_refusal(5s) == wire::refusal::timed_out));
  BOOST_TEST(s->wait_closed(5s));
}

// Issue 16 item 1: admission per source address.  An address's 17th
// handshake in progress drops its own oldest silent one (with a "busy"
// refusal), however many slots are free.
BOOST_AUTO_TEST_CASE(one_address_holds_at_most_its_share_of_handshakes) {
  auto opts = soft_options();
  opts.connect_timeout_ms = 20000;
  auto dev = open_soft(opts);
  auto lst = value_or_throw(dev->listen("127.0.0.1", 0, {}), "listen");
  std::atomic<bool> stop{false};
  auto acceptor = std::async(std::launch::async, [&] {
    while (!stop)
      (void)lst->accept(50ms);
  });
  constexpr size_t share
      = transport::soft::limits::max_pending_handshakes_per_address;
  std::vector<std::unique_ptr<raw_socket>> silent;
  for (size_t i = 0; i < share + 4; ++i)
    silent.push_back(raw_socket::connect(lst->port(), "127.0.0.2"));
  // The first 4 are dropped, each told "busy"; the rest stay.
  for (size_t i = 0; i < 4; ++i) {
    BOOST_TEST((silent[i]->read_refusal(10s) == wire::refusal::busy));
    BOOST_TEST(silent[i]->wait_closed(5s));
  }
  // Another address still gets a connection through.
  transport::queue_pair_ptr client;
  stop = true;
  acceptor.get();
  auto server = accept_while(*lst, [&] {
    client = value_or_throw(dev->connect("127.0.0.1", lst->port(), {}, 5s),
                            "connect");
  });
  check_send_works(*dev, *client, *server);
  for (size_t i = 4; i < silent.size(); ++i)
    BOOST_TEST(silent[i]->open_now(), "silent connection " << i);
}

// Issue 16 item 1: while silent connections arrive from 127.0.0.2 in bursts
// (10 per millisecond: ten times the flood issue 16 measured), a client
// whose hello comes 300 ms after connecting gets through every time
// (before, the flood evicted it).  An unpaced flood outruns accept() under
// ASan: then the kernel's listen backlog drops everyone's SYNs, which no
// admission rule above it can change (docs/security.md).
BOOST_AUTO_TEST_CASE(
    a_flood_of_silent_connections_does_not_starve_a_slow_client) {
  auto opts = soft_options();
  opts.connect_timeout_ms = 5000;
  auto dev = open_soft(opts);
  auto lst = value_or_throw(dev->listen("127.0.0.1", 0, {}), "listen");
  auto port = lst->port();
  std::atomic<bool> stop{false};
  std::atomic<size_t> accepted{0};
  auto acceptor = std::async(std::launch::async, [&] {
    std::vector<transport::queue_pair_ptr> qps;
    while (!stop)
      if (auto qp = lst->accept(50ms)) {
        qps.push_back(std::move(*qp));
        ++accepted;
      }
  });
  std::atomic<size_t> flood_made{0};
  auto flood = std::async(std::launch::async, [&] {
    std::deque<int> open;
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.2", &from.sin_addr);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    linger reset{1, 0}; // close with RST: no TIME_WAIT on our side
    while (!stop) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0)
        continue;
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
      if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0
          || (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0
              && errno != EINPROGRESS)) {
        ::close(fd);
        continue;
      }
      if (++flood_made % 10 == 0)
        std::this_thread::sleep_for(1ms);
      open.push_back(fd);
      if (open.size() > 200) {
        ::close(open.front());
        open.pop_front();
      }
    }
    for (auto fd : open)
      ::close(fd);
  });
  auto flood_until = std::chrono::steady_clock::now() + 10s;
  while (flood_made < 500 && std::chrono::steady_clock::now() < flood_until)
    std::this_thread::sleep_for(5ms);
  BOOST_REQUIRE(flood_made >= 500u);
  constexpr int clients = 10;
  int through = 0;
  for (int i = 0; i < clients; ++i) {
    auto c = raw_socket::connect(port);
    std::this_thread::sleep_for(300ms); // the slow client's hello
    std::array<uint8_t, wire::hello_size> buf{};
    wire::encode(default_hello(), buf.data());
    c->write_all(buf.data(), buf.size());
    wire::hello theirs;
    if (c->read_exact(buf.data(), buf.size(), 10s)
        && wire::decode(buf.data(), theirs) == wire::hello_status::ok)
      ++through;
  }
  auto during = flood_made.load();
  stop = true;
  flood.get();
  acceptor.get();
  BOOST_TEST_MESSAGE("flood connections while the clients ran: " << during);
  BOOST_TEST(through == clients);
  BOOST_TEST(accepted.load() == static_cast<size_t>(clients));
}

BOOST_AUTO_TEST_CASE(close_wakes_a_blocked_accept) {
  auto dev = open_soft(soft_options());
  auto lst = value_or_throw(dev->listen("127.0.0.1", 0, {}), "listen");
  auto start = std::chrono::steady_clock::now();
  auto fut = std::async(std::launch::async, [&] { return lst->accept(20s); });
  // Let accept block first (the listener shows no "accepting" state: a busy
  // machine may close first, and test less).
  std::this_thread::sleep_for(100ms);
  lst->close();
  lst->close();
  auto res = fut.get();
  BOOST_TEST(ms_since(start) < 10000); // woken, not timed out (20 s)
  BOOST_REQUIRE(!res);
  BOOST_TEST(code_of(res.error()) == errc::closed);
  // Connecting afterwards fails fast.
  auto c = dev->connect("127.0.0.1", lst->port(), {}, 1s);
  BOOST_TEST(!c);
}

BOOST_AUTO_TEST_CASE(accept_times_out) {
  auto dev = open_soft(soft_options());
  auto lst = value_or_throw(dev->listen("127.0.0.1", 0, {}), "listen");
  auto start = std::chrono::steady_clock::now();
  auto res = lst->accept(200ms);
  BOOST_REQUIRE(!res);
  BOOST_TEST(code_of(res.error()) == errc::connect_timeout);
  BOOST_TEST(ms_since(start) >= 150);
}

// Only an offer starts a connection.  A refusal hello (both offers 0 and
// a reason), an offer of 0 bytes or 0 receives, and a receive depth below
// what the data path needs (min_recv_depth) are dropped without an answer,
// and the listener keeps serving real clients.
BOOST_AUTO_TEST_CASE(hellos_that_are_no_offer_are_dropped_unanswered) {
  auto dev = open_soft(soft_options());
  auto lst = value_or_throw(dev->listen("127.0.0.1", 0, {}), "listen");
  auto port = lst->port();
  std::vector<wire::hello> hellos;
  for (auto why : {wire::refusal::busy, wire::refusal::timed_out})
    hellos.push_back(wire::refusal_hello(why));
  auto zero_len = default_hello();
  zero_len.max_message_len_bytes = 0;
  hellos.push_back(zero_len);
  for (uint32_t depth : {0u, 1u, 2u, 3u}) {
    auto shallow = default_hello();
    shallow.recv_depth = depth;
    hellos.push_back(shallow);
  }
  transport::queue_pair_ptr client;
  auto server = accept_while(
      *lst,
      [&] {
        for (size_t i = 0; i < hellos.size(); ++i) {
          BOOST_TEST_CONTEXT("hello " << i) {
            auto s = raw_socket::connect(port);
            std::array<uint8_t, wire::hello_size> bytes{};
            wire::encode(hellos[i], bytes.data());
            s->write_all(bytes.data(), bytes.size());
            // Closed without our hello: no connection was started.
            BOOST_TEST(!s->read_exact(bytes.data(), bytes.size(), 5s));
            BOOST_TEST(s->wait_closed(1s));
          }
        }
        client = value_or_throw(dev->connect("127.0.0.1", port, {}, 5s),
                                "connect");
      },
      30s);
  BOOST_REQUIRE(server);
  check_send_works(*dev, *client, *server);
  BOOST_TEST(server->params().recv_depth >= transport::min_recv_depth);
  // The wire check and the local one state the same minimum.
  std::array<uint8_t, wire::hello_size> bytes{};
  auto three = default_hello();
  three.recv_depth = transport::min_recv_depth - 1;
  wire::encode(three, bytes.data());
  wire::hello out;
  BOOST_TEST(
      (wire::decode(bytes.data(), out) == wire::hello_status::bad_params));
  auto shallow_listen = dev->listen(
      "127.0.0.1", 0, conn_params{4096, transport::min_recv_depth - 1});
  BOOST_REQUIRE(!shallow_listen);
  BOOST_TEST(code_of(shallow_listen.error()) == errc::invalid_argument);
}

// Connection churn: every line a connection's start or end can write (a
// handshake dropped, a queue pair in the error state, a connection down)
// goes through the shared "connections" budget, so that hundreds of short
// connections write at most the budget's lines.  The budget is lowered
// for the test so that a few hundred connections exceed it many times.
BOOST_AUTO_TEST_CASE(connection_churn_writes_at_most_the_shared_budget) {
  constexpr uint64_t budget = 20;
  auto& shared = shared_log_budget("connections");
  shared.reset(budget, std::chrono::minutes(1));
  log_capture logs;
  // Info: the queue pairs' "error state" lines count too.
  auto saved_level = log().level();
  log().set_level(spdlog::level::info);
  {
    auto dev = open_soft(soft_options());
    auto lst = value_or_throw(dev->listen("127.0.0.1", 0, {}), "listen");
    auto port = lst->port();
    constexpr size_t dropped = 300; // close during the handshake
    constexpr size_t killed = 50;   // close right after it
    std::vector<transport::queue_pair_ptr> servers;
    std::thread acceptor([&] {
      auto deadline = std::chrono::steady_clock::now() + 20s;
      while (servers.size() < killed
             && std::chrono::steady_clock::now() < deadline)
        if (auto qp = lst->accept(50ms))
          servers.push_back(std::move(*qp));
    });
    for (size_t i = 0; i < dropped; ++i)
      raw_socket::connect(port).reset();
    for (size_t i = 0; i < killed; ++i) {
      auto c = dev->connect("127.0.0.1", port, {}, 5s);
      BOOST_REQUIRE_MESSAGE(c, render(c));
    }
    acceptor.join();
    BOOST_REQUIRE_EQUAL(servers.size(), killed);
    for (auto& qp : servers)
      BOOST_TEST(wait_error(*qp));
  }
  log().set_level(saved_level);
  auto lines = logs.lines->count(spdlog::level::info);
  BOOST_TEST(lines <= budget, logs.lines->dump(spdlog::level::info));
  // The churn did try to write: the budget held the rest back.
  BOOST_TEST(shared.take_denied() >= 100u);
  shared.reset(tuning::shared_log_lines,
               std::chrono::milliseconds(tuning::shared_log_window_ms));
}

BOOST_AUTO_TEST_CASE(client_reports_handshake_errors) {
  auto dev = open_soft(soft_options());
  // A plain TCP server that answers whatever we tell it to.
  int srv = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::bind(srv, reinterpret_cast<sockaddr*>(&sin), sizeof(sin))
                == 0);
  BOOST_REQUIRE(::listen(srv, 8) == 0);
  socklen_t len = sizeof(sin);
  ::getsockname(srv, reinterpret_cast<sockaddr*>(&sin), &len);
  auto port = ntohs(sin.sin_port);
  auto serve = [srv](std::vector<uint8_t> reply) {
    return std::async(std::launch::async, [srv, reply] {
      int c = ::accept(srv, nullptr, nullptr);
      std::array<uint8_t, wire::hello_size> buf{};
      size_t got = 0;
      while (got < buf.size()) {
        auto k = ::recv(c, buf.data() + got, buf.size() - got, 0);
        if (k <= 0)
          break;
        got += static_cast<size_t>(k);
      }
      if (!reply.empty())
        ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      // Hold the connection until the client gives up on it (EOF), so that
      // the client learns only from what it was sent or from its timeout.
      pollfd pfd{c, POLLIN, 0};
      if (::poll(&pfd, 1, 10000) == 1)
        ::recv(c, buf.data(), buf.size(), 0);
      ::close(c);
    });
  };
  std::vector<uint8_t> other(wire::hello_size);
  auto h = default_hello();
  h.version = wire::version + 1;
  wire::encode(h, other.data());
  auto f1 = serve(other);
  auto r1 = dev->connect("127.0.0.1", port, {}, 2s);
  BOOST_REQUIRE(!r1);
  BOOST_TEST(code_of(r1.error()) == errc::version_mismatch);
  f1.get();
  std::vector<uint8_t> junk(wire::hello_size, 0x42);
  auto f2 = serve(junk);
  auto r2 = dev->connect("127.0.0.1", port, {}, 2s);
  BOOST_REQUIRE(!r2);
  BOOST_TEST(code_of(r2.error()) == errc::handshake_failed);
  f2.get();
  auto f3 = serve({});
  auto start = std::chrono::steady_clock::now();
  auto r3 = dev->connect("127.0.0.1", port, {}, 200ms);
  BOOST_REQUIRE(!r3);
  BOOST_TEST(code_of(r3.error()) == errc::connect_timeout);
  BOOST_TEST(ms_since(start) < 5000); // its own 200 ms, not the server's
  f3.get();
  // A listener that dropped the handshake says so (a refusal hello).
  for (auto why : {wire::refusal::busy, wire::refusal::timed_out}) {
    std::vector<uint8_t> refusal(wire::hello_size);
    wire::encode(wire::refusal_hello(why), refusal.data());
    auto f = serve(refusal);
    auto r = dev->connect("127.0.0.1", port, {}, 2s);
    BOOST_REQUIRE(!r);
    BOOST_TEST(code_of(r.error())
               == (why == wire::refusal::busy ? errc::connect_failed
                                              : errc::connect_timeout));
    BOOST_TEST(render(r.error()).find("dropped our handshake")
                   != std::string::npos,
               render(r.error()));
    f.get();
  }
  ::close(srv);
  // Nothing listening.
  auto r4 = dev->connect("127.0.0.1", port, {}, 1s);
  BOOST_REQUIRE(!r4);
  BOOST_TEST(code_of(r4.error()) == errc::connect_failed);
  auto r5 = dev->connect("no.such.host.invalid", 1, {}, 1s);
  BOOST_REQUIRE(!r5);
  BOOST_TEST(code_of(r5.error()) == errc::invalid_address);
}

BOOST_AUTO_TEST_SUITE_END()
