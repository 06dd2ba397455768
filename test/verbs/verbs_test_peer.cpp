// verbs_test_peer HOST PORT: the far end of verbs_test's peer-death case.
//
// Connects to HOST:PORT with the verbs fabric, sends one 64-byte message,
// prints "ready" on stdout once the send completed, then waits to be
// killed (it exits by itself after 120 s).  Exit status 0 after the wait,
// 1 when anything failed before "ready".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "rdmactor/error.hpp"
#include "rdmactor/options.hpp"
#include "rdmactor/transport/fabric.hpp"

using namespace rdmactor;
using namespace std::chrono_literals;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: verbs_test_peer HOST PORT\n");
    return 1;
  }
  options opts;
  opts.fabric = "verbs";
  auto dev = transport::open_device(opts);
  if (!dev) {
    std::fprintf(stderr, "peer: %s\n", render(dev.error()).c_str());
    return 1;
  }
  auto port = static_cast<uint16_t>(std::strtoul(argv[2], nullptr, 10));
  auto qp = (*dev)->connect(argv[1], port, {}, 30s);
  if (!qp) {
    std::fprintf(stderr, "peer: %s\n", render(qp.error()).c_str());
    return 1;
  }
  std::vector<uint8_t> buf(64, 0x5A);
  auto mr = (*dev)->register_memory(buf.data(), buf.size(), 0);
  if (!mr) {
    std::fprintf(stderr, "peer: %s\n", render(mr.error()).c_str());
    return 1;
  }
  transport::sge sg{reinterpret_cast<uint64_t>(buf.data()), 64, (*mr)->lkey()};
  if (auto err = (*qp)->post_send(1, &sg, 1)) {
    std::fprintf(stderr, "peer: %s\n", render(err).c_str());
    return 1;
  }
  auto deadline = std::chrono::steady_clock::now() + 30s;
  transport::work_completion wc;
  while ((*qp)->poll_cq(&wc, 1) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "peer: the send did not complete in 30 s\n");
      return 1;
    }
    std::this_thread::sleep_for(1ms);
  }
  if (wc.status != transport::wc_status::success) {
    std::fprintf(stderr, "peer: send failed: %s\n", to_string(wc.status));
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  std::this_thread::sleep_for(120s);
  return 0;
}
