#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>

#include <boost/test/unit_test.hpp>

#include "common/logging.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/options.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor::transport {

/// Prints a completion status in test messages.
inline std::ostream& operator<<(std::ostream& os, wc_status x) {
  static const char* const names[] = {"success",
                                      "local_length_error",
                                      "local_protection_error",
                                      "remote_access_error",
                                      "remote_operation_error",
                                      "rnr_retry_exceeded",
                                      "transport_retry_exceeded",
                                      "work_request_flushed",
                                      "general_error"};
  auto i = static_cast<size_t>(x);
  return os << (i < sizeof(names) / sizeof(names[0]) ? names[i] : "?");
}

/// Prints a completion opcode in test messages.
inline std::ostream& operator<<(std::ostream& os, wc_opcode x) {
  static const char* const names[]
      = {"send", "rdma_write", "rdma_read", "recv", "recv_rdma_with_imm"};
  auto i = static_cast<size_t>(x);
  return os << (i < sizeof(names) / sizeof(names[0]) ? names[i] : "?");
}

} // namespace rdmactor::transport

/// Helpers shared by the fabric test suites.
namespace rdmactor::test {

using namespace std::chrono_literals;

// The fabric's names the suites use unqualified.
using transport::atomic_op;
using transport::conn_params;
using transport::sge;
using transport::wc_opcode;
using transport::wc_status;
using transport::work_completion;
using transport::access::local_write;
using transport::access::remote_atomic;
using transport::access::remote_read;
using transport::access::remote_write;

/// Returns the environment variable `name`, or `fallback` when unset.
inline std::string env_or(const char* name, const char* fallback) {
  auto* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

/// Returns the environment variable `name` as a number, or `fallback`.
inline uint64_t env_number(const char* name, uint64_t fallback) {
  auto* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::strtoull(value, nullptr, 10)
                                            : fallback;
}

/// Returns options for the fabric under test (RDMACTOR_TEST_FABRIC,
/// default "soft").
inline options fabric_options() {
  options opts;
  opts.fabric = env_or("RDMACTOR_TEST_FABRIC", "soft");
  opts.log_level = env_or("RDMACTOR_TEST_LOG_LEVEL", "warn");
  return opts;
}

/// Returns the address to listen and connect on (RDMACTOR_TEST_HOST,
/// default 127.0.0.1).
inline std::string test_host() {
  return env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
}

/// Throws when `x` holds an error (Boost.Test reports the message).
template <class T>
T value_or_throw(caf::expected<T>&& x, const char* what) {
  if (!x)
    throw std::runtime_error(std::string{what} + ": " + render(x.error()));
  return std::move(*x);
}

/// A registered buffer.
struct reg_buffer {
  std::vector<uint8_t> bytes;
  std::unique_ptr<transport::memory_region> mr;

  uint8_t* data() {
    return bytes.data();
  }

  /// Returns the address of byte `offset` as the fabric sees it.
  uint64_t addr(size_t offset = 0) const {
    return reinterpret_cast<uint64_t>(bytes.data() + offset);
  }

  /// Returns an sge for `[offset, offset + len)`.
  transport::sge sge_of(size_t offset, size_t len) const {
    return transport::sge{addr(offset), static_cast<uint32_t>(len), mr->lkey()};
  }

  /// Returns an sge for the whole buffer.
  transport::sge whole() const {
    return sge_of(0, bytes.size());
  }
};

/// Allocates `size` bytes filled with `fill` and registers them.
inline reg_buffer make_buffer(transport::device& dev, size_t size,
                              uint32_t access, uint8_t fill = 0) {
  reg_buffer b;
  b.bytes.assign(size, fill);
  b.mr = value_or_throw(dev.register_memory(b.bytes.data(), size, access),
                        "register_memory");
  return b;
}

/// Fills `p[0..n)` with a pattern that depends on `seed` and the position.
inline void fill_pattern(uint8_t* p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    p[i] = static_cast<uint8_t>(x >> 16);
  }
}

/// Returns true when `p[0..n)` holds the pattern of `seed`.
inline bool has_pattern(const uint8_t* p, size_t n, uint32_t seed) {
  std::vector<uint8_t> expected(n);
  fill_pattern(expected.data(), n, seed);
  return std::equal(expected.begin(), expected.end(), p);
}

/// Returns true when every byte of `p[0..n)` equals `value`.
inline bool all_bytes(const uint8_t* p, size_t n, uint8_t value) {
  return std::all_of(p, p + n, [value](uint8_t x) { return x == value; });
}

/// Two connected queue pairs on one device, and the listener.
struct qp_pair {
  std::unique_ptr<transport::listener> lst;
  transport::queue_pair_ptr client;
  transport::queue_pair_ptr server;
};

/// Listens on the test host (port 0), connects to it and accepts.
inline qp_pair connect_pair(transport::device& dev,
                            const transport::conn_params& client_offer,
                            const transport::conn_params& server_offer,
                            std::chrono::milliseconds timeout = 10s) {
  qp_pair p;
  auto host = test_host();
  p.lst = value_or_throw(dev.listen(host, 0, server_offer), "listen");
  auto port = p.lst->port();
  auto fut = std::async(std::launch::async,
                        [&dev, host, port, client_offer, timeout] {
                          return dev.connect(host, port, client_offer, timeout);
                        });
  auto accepted = p.lst->accept(timeout);
  p.client = value_or_throw(fut.get(), "connect");
  p.server = value_or_throw(std::move(accepted), "accept");
  return p;
}

/// Same with one offer for both sides.
inline qp_pair connect_pair(transport::device& dev,
                            const transport::conn_params& offer = {}) {
  return connect_pair(dev, offer, offer);
}

/// Moves the completions that are there now into `out`; returns how many.
inline size_t drain_cq(transport::queue_pair& qp,
                       std::vector<transport::work_completion>& out) {
  transport::work_completion wc[32];
  size_t total = 0;
  for (;;) {
    auto n = qp.poll_cq(wc, 32);
    out.insert(out.end(), wc, wc + n);
    total += n;
    if (n < 32)
      return total;
  }
}

/// Blocks on the CQ notification fd until `qp` delivered `n` completions or
/// `timeout` passed (arm, poll once more, then poll(2) on cq_fd).
inline std::vector<transport::work_completion>
wait_completions(transport::queue_pair& qp, size_t n,
                 std::chrono::milliseconds timeout = 10s) {
  std::vector<transport::work_completion> out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    drain_cq(qp, out);
    if (out.size() >= n)
      return out;
    if (auto err = qp.arm_cq())
      throw std::runtime_error("arm_cq: " + render(err));
    if (drain_cq(qp, out) > 0)
      continue;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      return out;
    auto ms
        = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now)
              .count()
          + 1;
    pollfd p{qp.cq_fd(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(ms));
    qp.ack_cq_event();
  }
}

/// Polls the CQ of `qp` (without arming it, so no notification is asked
/// for) until `n` completions arrived or `timeout` passed.
inline std::vector<transport::work_completion>
poll_completions(transport::queue_pair& qp, size_t n,
                 std::chrono::milliseconds timeout = 10s) {
  std::vector<transport::work_completion> out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    drain_cq(qp, out);
    if (out.size() >= n || std::chrono::steady_clock::now() >= deadline)
      return out;
    std::this_thread::sleep_for(1ms);
  }
}

/// Waits for the completion of `wr_id` (other completions go to `others`).
inline std::optional<transport::work_completion>
wait_for_wr(transport::queue_pair& qp, uint64_t wr_id,
            std::chrono::milliseconds timeout = 10s,
            std::vector<transport::work_completion>* others = nullptr) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      return std::nullopt;
    auto wcs = wait_completions(
        qp, 1,
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
    std::optional<transport::work_completion> found;
    for (auto& wc : wcs) {
      if (wc.wr_id == wr_id && !found)
        found = wc;
      else if (others != nullptr)
        others->push_back(wc);
    }
    if (found)
      return found;
  }
}

/// Returns the number of completions in `wcs` with status `st`.
inline size_t count_status(const std::vector<transport::work_completion>& wcs,
                           transport::wc_status st) {
  return static_cast<size_t>(std::count_if(
      wcs.begin(), wcs.end(),
      [st](const transport::work_completion& wc) { return wc.status == st; }));
}

/// Returns milliseconds since `start`.
inline long long ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now() - start)
      .count();
}

/// A connected pair on `dev` for bursts of `count` messages of `bytes`:
/// the server has `count` receives posted (wr_ids 100, 101, ...) into
/// `dst`; `src` holds the client's messages (a pattern); `target` takes
/// RDMA WRITEs.  With `held_receives`, the server posts its receives
/// behind a held doorbell and rings once (`queue_pair::hold_doorbell`).
struct burst_pair {
  transport::device_ptr dev;
  qp_pair p;
  size_t count;
  size_t bytes;
  reg_buffer src;
  reg_buffer dst;
  reg_buffer target;

  burst_pair(transport::device_ptr d, size_t n, size_t len,
             bool held_receives = false)
      : dev(std::move(d)), p(connect_pair(*dev)), count(n), bytes(len),
        src(make_buffer(*dev, n * len, 0)),
        dst(make_buffer(*dev, n * len, transport::access::local_write)),
        target(make_buffer(*dev, n * len,
                           transport::access::local_write
                               | transport::access::remote_write)) {
    fill_pattern(src.data(), src.bytes.size(), 11);
    if (held_receives)
      p.server->hold_doorbell();
    for (size_t i = 0; i < count; ++i) {
      auto sg = dst.sge_of(i * bytes, bytes);
      if (auto err = p.server->post_recv(100 + i, &sg, 1))
        throw std::runtime_error("post_recv: " + render(err));
    }
    if (held_receives)
      if (auto err = p.server->ring_doorbell())
        throw std::runtime_error("ring_doorbell: " + render(err));
  }

  /// The scatter/gather element of message `i` of `src`.
  transport::sge message(size_t i) const {
    return src.sge_of(i * bytes, bytes);
  }
};

/// A device of the fabric under test (RDMACTOR_TEST_FABRIC), opened by
/// `open`.
struct fabric_fixture {
  options opts;
  transport::device_ptr dev;

  fabric_fixture() {
    opts = fabric_options();
    set_log_level(opts.log_level);
  }

  transport::device& open(uint32_t rnr_timeout_ms = 2000) {
    opts.rnr_timeout_ms = rnr_timeout_ms;
    dev = value_or_throw(transport::open_device(opts), "open_device");
    return *dev;
  }
};

/// Posts a receive of the whole buffer (or of [offset, offset + len)).
inline void post_recv(transport::queue_pair& qp, uint64_t wr_id,
                      const reg_buffer& buf, size_t offset = 0,
                      size_t len = 0) {
  auto sg = buf.sge_of(offset, len == 0 ? buf.bytes.size() - offset : len);
  auto err = qp.post_recv(wr_id, &sg, 1);
  BOOST_REQUIRE_MESSAGE(!err, render(err));
}

/// Returns one completion or fails the test.
inline transport::work_completion
one_completion(transport::queue_pair& qp,
               std::chrono::milliseconds timeout = 10s) {
  auto wcs = wait_completions(qp, 1, timeout);
  BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
  return wcs.front();
}

/// Waits until `qp` reports the error state.
inline bool wait_error(transport::queue_pair& qp,
                       std::chrono::milliseconds t = 5s) {
  auto deadline = std::chrono::steady_clock::now() + t;
  while (!qp.in_error()) {
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

} // namespace rdmactor::test
