// Soft-fabric-only tests: two processes (a peer killed or stopped).

#include <boost/test/unit_test.hpp>

#include <csignal>
#include <sys/wait.h>

#include "test/transport/soft_fabric_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

/// Runs `fn` in a child process; the child exits with its return value.
template <class F>
pid_t spawn_child(F fn) {
  ::fflush(nullptr);
  auto pid = ::fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = fn();
    } catch (...) {
      rc = 98;
    }
    ::_exit(rc);
  }
  if (pid < 0)
    throw std::runtime_error("fork failed");
  return pid;
}

/// Waits for the child; kills it after `timeout`.  Returns its exit status
/// (-1 when killed by us or by a signal).
int wait_child(pid_t pid, std::chrono::milliseconds timeout = 20s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    auto rc = ::waitpid(pid, &status, WNOHANG);
    if (rc == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(5ms);
  }
}

} // namespace

// -- two processes
// -------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(two_processes)

BOOST_AUTO_TEST_CASE(send_receive_and_write_across_processes) {
  auto opts = soft_options();
  auto dev = open_soft(opts);
  auto lst = value_or_throw(dev->listen("127.0.0.1", 0, {}), "listen");
  auto port = lst->port();
  constexpr size_t n = 64 * 1024;
  auto target = make_buffer(*dev, 2 * n, local_write | remote_write, 0);
  auto target_addr = target.addr();
  auto target_rkey = target.mr->rkey();
  auto child = spawn_child([=]() -> int {
    auto cdev = soft::open_device(opts);
    if (!cdev)
      return 10;
    auto qp = (*cdev)->connect("127.0.0.1", port, {}, 5s);
    if (!qp)
      return 11;
    auto src = make_buffer(**cdev, 2 * n, 0);
    auto inbox = make_buffer(**cdev, n, local_write);
    auto isg = inbox.whole();
    if ((*qp)->post_recv(1, &isg, 1))
      return 12;
    fill_pattern(src.data(), n, 1);
    auto sg = src.sge_of(0, n);
    if ((*qp)->post_send(2, &sg, 1))
      return 13;
    fill_pattern(src.data(), 2 * n, 3);
    auto wsg = src.whole();
    if ((*qp)->post_write(3, &wsg, 1, target_addr, target_rkey))
      return 14;
    auto nsg = src.sge_of(0, 0);
    if ((*qp)->post_send(4, &nsg, 1, 0xD0u))
      return 15;
    auto wcs = wait_completions(**qp, 4, 10s);
    if (wcs.size() != 4)
      return 16;
    for (auto& wc : wcs)
      if (wc.status != wc_status::success)
        return 17;
    for (auto& wc : wcs)
      if (wc.wr_id == 1 && !has_pattern(inbox.data(), n, 2))
        return 18;
    return 0;
  });
  auto qp = value_or_throw(lst->accept(10s), "accept");
  auto inbox = make_buffer(*dev, n, local_write);
  auto sg0 = inbox.sge_of(0, n);
  BOOST_REQUIRE(!qp->post_recv(1, &sg0, 1));
  auto first = wait_completions(*qp, 1);
  BOOST_REQUIRE_EQUAL(first.size(), 1u);
  BOOST_TEST(first[0].status == wc_status::success);
  BOOST_TEST(has_pattern(inbox.data(), n, 1));
  BOOST_REQUIRE(!qp->post_recv(2, &sg0, 1));
  auto done = wait_completions(*qp, 1);
  BOOST_REQUIRE_EQUAL(done.size(), 1u);
  BOOST_TEST(done[0].has_imm);
  BOOST_TEST(done[0].imm_data == 0xD0u);
  // The write came before the notification: it is all there.
  BOOST_TEST(has_pattern(target.data(), 2 * n, 3));
  auto reply = make_buffer(*dev, n, 0);
  fill_pattern(reply.data(), n, 2);
  auto rsg = reply.whole();
  BOOST_REQUIRE(!qp->post_send(9, &rsg, 1));
  auto sent = wait_completions(*qp, 1);
  BOOST_REQUIRE_EQUAL(sent.size(), 1u);
  BOOST_TEST(sent[0].status == wc_status::success);
  BOOST_TEST(wait_child(child) == 0);
}

BOOST_AUTO_TEST_CASE(peer_killed_mid_transfer) {
  auto opts = soft_options(30000);
  auto dev = open_soft(opts);
  auto lst = value_or_throw(dev->listen("127.0.0.1", 0, {}), "listen");
  auto port = lst->port();
  constexpr size_t n = 1 << 20;
  auto target = make_buffer(*dev, n, local_write | remote_write, 0);
  auto target_addr = target.addr();
  auto target_rkey = target.mr->rkey();
  auto child = spawn_child([=]() -> int {
    auto cdev = soft::open_device(opts);
    if (!cdev)
      return 10;
    auto qp = (*cdev)->connect("127.0.0.1", port, {}, 5s);
    if (!qp)
      return 11;
    auto src = make_buffer(**cdev, n, 0);
    fill_pattern(src.data(), n, 4);
    auto msg = src.sge_of(0, 1000);
    for (uint64_t i = 0; i < 2; ++i)
      (*qp)->post_send(i, &msg, 1);
    // Stream writes until killed; never post a receive.  A third message
    // behind the first eight writes tells the parent that the stream runs
    // (the parent executes them in order).
    auto wsg = src.sge_of(0, 256 * 1024);
    for (uint64_t i = 0;; ++i) {
      if ((*qp)->post_write(100 + i, &wsg, 1, target_addr, target_rkey,
                            std::nullopt, i % 8 == 7))
        return 12;
      if (i == 7)
        (*qp)->post_send(2, &msg, 1);
      if (i % 8 == 7)
        wait_completions(**qp, 1, 5s);
    }
  });
  auto qp = value_or_throw(lst->accept(10s), "accept");
  auto inbox = make_buffer(*dev, 8 * 1000, local_write);
  for (uint64_t i = 0; i < 8; ++i) {
    auto sg = inbox.sge_of(i * 1000, 1000);
    BOOST_REQUIRE(!qp->post_recv(i, &sg, 1));
  }
  // Sends the child never takes (it posts no receive): outstanding.
  auto out = make_buffer(*dev, 4096, 0);
  auto osg = out.whole();
  for (uint64_t i = 0; i < 4; ++i)
    BOOST_REQUIRE(!qp->post_send(50 + i, &osg, 1));
  // The two messages, then the third behind eight writes: mid-stream.
  auto got = wait_completions(*qp, 3, 20s);
  BOOST_REQUIRE_EQUAL(got.size(), 3u);
  BOOST_TEST(count_status(got, wc_status::success) == 3u);
  ::kill(child, SIGKILL);
  auto start = std::chrono::steady_clock::now();
  auto rest = wait_completions(*qp, 9, 9s);
  // From the socket's end, well before the transport timer (over 10 s).
  BOOST_TEST(ms_since(start) < 9000);
  BOOST_REQUIRE_EQUAL(rest.size(), 9u);
  BOOST_TEST(count_status(rest, wc_status::success) == 0u);
  BOOST_TEST(qp->in_error());
  BOOST_TEST(wait_completions(*qp, 1, 100ms).empty());
  BOOST_TEST(wait_child(child) == -1);
}

namespace {

/// A send to a stopped peer fails with transport_retry_exceeded after the
/// transport timeout (request-timeout-ms + the peer's RNR timeout); posted
/// after `idle` without any work on the queue pair.
void stopped_peer_case(std::chrono::milliseconds idle) {
  auto opts = soft_options(100);
  opts.request_timeout_ms = 500;
  auto dev = open_soft(opts);
  auto lst = value_or_throw(dev->listen("127.0.0.1", 0, {}), "listen");
  auto port = lst->port();
  auto child = spawn_child([=]() -> int {
    auto cdev = soft::open_device(opts);
    if (!cdev)
      return 10;
    auto qp = (*cdev)->connect("127.0.0.1", port, {}, 5s);
    if (!qp)
      return 11;
    ::raise(SIGSTOP);
    return 0;
  });
  // A failed check must not leave the stopped child behind (it holds the
  // test's output open).
  struct reaper {
    pid_t pid;
    ~reaper() {
      ::kill(pid, SIGKILL);
    }
  } reap{child};
  auto qp = value_or_throw(lst->accept(10s), "accept");
  // Wait for the child to stop.
  bool stopped = false;
  for (int i = 0; i < 2000 && !stopped; ++i) {
    int status = 0;
    stopped = ::waitpid(child, &status, WNOHANG | WUNTRACED) == child
              && WIFSTOPPED(status);
    if (!stopped)
      std::this_thread::sleep_for(10ms);
  }
  BOOST_REQUIRE(stopped);
  std::this_thread::sleep_for(idle);
  auto src = make_buffer(*dev, 100, 0);
  auto sg = src.whole();
  auto start = std::chrono::steady_clock::now();
  BOOST_REQUIRE(!qp->post_send(1, &sg, 1));
  auto wcs = wait_completions(*qp, 1, 10s);
  auto elapsed = ms_since(start);
  BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
  BOOST_TEST(wcs[0].status == wc_status::transport_retry_exceeded);
  // The transport timeout of these options (500 + 100 ms), not the
  // default's (12 s); the upper bound leaves room for a busy machine.
  BOOST_TEST(elapsed >= 400);
  BOOST_TEST(elapsed < 10000);
  ::kill(child, SIGKILL);
  BOOST_TEST(wait_child(child) == -1);
}

} // namespace

BOOST_AUTO_TEST_CASE(stopped_peer_ends_in_transport_retry_exceeded) {
  stopped_peer_case(0ms);
}

// A queue pair idle for half its transport timeout keeps no timer in the
// event loop (an idle connection costs it nothing); the post that gives it
// work wakes the loop, so the transport timer still runs.
BOOST_AUTO_TEST_CASE(a_post_after_a_long_idle_still_runs_the_transport_timer) {
  stopped_peer_case(1500ms);
}

BOOST_AUTO_TEST_SUITE_END()
