// The peer process of reliability_test: connects to HOST:PORT and does one
// thing (MODE) until it is killed, printing a line on stdout when it has
// reached the state the test kills or stops it in.
//
//   reliability_peer HOST:PORT MODE [BYTES] [COUNT]
//
// Modes:
//   stream-write  requests a BYTES region on the server and writes all of it
//                 with one RDMA WRITE, again and again; prints "streaming"
//                 before the first write and "wrote" after it (the next
//                 one follows at once)
//   lend          allocates BYTES, lends it to the server (SendMR LOCAL),
//                 prints "lent" and waits
//   send-data     sends BYTES with send_data, again and again; prints
//                 "sending" before the first
//   hold          requests COUNT regions of BYTES on the server and lends it
//                 COUNT regions of its own; prints "holding" and waits
//   flood-alloc   requests regions of BYTES on the server without releasing
//                 any, one after the other, until the server disconnects;
//                 prints "refused N" at the first refusal (N accepted before)
//                 and "disconnected N M" (accepted, refused) at the end, then
//                 exits 0
//   idle          opens COUNT connections in all (at least one), prints
//                 "ready" and waits (the test stops it with SIGSTOP)
//
// The fabric comes from RDMACTOR_TEST_FABRIC (default soft).  Every mode
// exits by itself (status 3) after 120 s, so a forgotten peer goes away.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <caf/actor_system.hpp>

#include "rdmactor/config.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/node.hpp"
#include "test/reliability/reliability_options.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

/// Prints one line on stdout at once (the test reads it through a pipe).
void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

[[noreturn]] void wait_to_be_killed() {
  for (;;)
    std::this_thread::sleep_for(std::chrono::seconds(1));
}

/// Fills `mr` with a pattern derived from `seed`.
void fill(local_mr& mr, uint8_t seed) {
  for (size_t i = 0; i < mr.size(); ++i)
    mr.data()[i] = static_cast<uint8_t>(i * 31 + seed);
}

int fail(const std::string& what, const caf::error& err) {
  say("error " + what + ": " + render(err));
  return 1;
}

int run(caf::actor_system& sys, connection_actor conn, const std::string& mode,
        uint64_t bytes, uint64_t count) {
  if (mode == "stream-write") {
    auto dst = call<remote_mr>(sys, conn, request_remote_mr_atom::value, bytes,
                               uint64_t{64});
    if (!dst)
      return fail("request_remote_mr", dst.error());
    auto src = call<local_mr>(sys, conn, alloc_local_mr_atom::value, bytes,
                              uint64_t{64});
    if (!src)
      return fail("alloc_local_mr", src.error());
    fill(*src, 1);
    say("streaming");
    for (bool first = true;; first = false) {
      auto n = call<uint64_t>(sys, conn, write_atom::value, *src, *dst);
      if (!n)
        return fail("write", n.error());
      if (first)
        say("wrote");
    }
  }
  if (mode == "lend") {
    auto mr = call<local_mr>(sys, conn, alloc_local_mr_atom::value, bytes,
                             uint64_t{64});
    if (!mr)
      return fail("alloc_local_mr", mr.error());
    fill(*mr, 2);
    auto sent = call<mr_token>(sys, conn, send_mr_atom::value, *mr);
    if (!sent)
      return fail("send_mr", sent.error());
    say("lent");
    wait_to_be_killed();
  }
  if (mode == "send-data") {
    auto mr = call<local_mr>(sys, conn, alloc_local_mr_atom::value, bytes,
                             uint64_t{64});
    if (!mr)
      return fail("alloc_local_mr", mr.error());
    fill(*mr, 3);
    say("sending");
    for (;;) {
      auto n = call<uint64_t>(sys, conn, send_data_atom::value, *mr);
      if (!n)
        return fail("send_data", n.error());
    }
  }
  if (mode == "hold") {
    std::vector<remote_mr> theirs;
    std::vector<local_mr> ours;
    for (uint64_t i = 0; i < count; ++i) {
      auto r = call<remote_mr>(sys, conn, request_remote_mr_atom::value, bytes,
                               uint64_t{64});
      if (!r)
        return fail("request_remote_mr", r.error());
      theirs.push_back(*r);
      auto l = call<local_mr>(sys, conn, alloc_local_mr_atom::value, bytes,
                              uint64_t{64});
      if (!l)
        return fail("alloc_local_mr", l.error());
      auto sent = call<mr_token>(sys, conn, send_mr_atom::value, *l);
      if (!sent)
        return fail("send_mr", sent.error());
      ours.push_back(*l);
    }
    say("holding");
    wait_to_be_killed();
  }
  if (mode == "flood-alloc") {
    std::vector<remote_mr> kept;
    uint64_t refused = 0;
    for (int i = 0; i < 100000; ++i) {
      auto r = call<remote_mr>(sys, conn, request_remote_mr_atom::value, bytes,
                               uint64_t{64});
      if (r) {
        kept.push_back(*r);
        continue;
      }
      if (code_of(r.error()) != errc::quota_exceeded) {
        say("disconnected " + std::to_string(kept.size()) + " "
            + std::to_string(refused));
        return 0;
      }
      if (refused++ == 0)
        say("refused " + std::to_string(kept.size()));
    }
    say("still connected");
    return 1;
  }
  if (mode == "idle") {
    say("ready");
    wait_to_be_killed();
  }
  say("error unknown mode " + mode);
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s HOST:PORT MODE [BYTES] [COUNT]\n", argv[0]);
    return 2;
  }
  std::string target = argv[1];
  std::string mode = argv[2];
  uint64_t bytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1 << 20;
  uint64_t count = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 8;
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(120));
    std::_Exit(3);
  }).detach();
  rdmactor::config cfg;
  caf::actor_system sys{cfg};
  auto nd = node::open(sys, reliability_options());
  if (!nd)
    return fail("open", nd.error());
  auto conn = (*nd)->connect(target);
  if (!conn)
    return fail("connect", conn.error());
  // idle: the other connections of COUNT, held until the process ends.
  std::vector<connection_actor> more;
  for (uint64_t i = 1; mode == "idle" && i < count; ++i) {
    auto c = (*nd)->connect(target);
    if (!c)
      return fail("connect", c.error());
    more.push_back(*c);
  }
  auto rc = run(sys, *conn, mode, bytes, count);
  (*nd)->close();
  return rc;
}
