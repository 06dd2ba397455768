// Helpers shared by the soft-fabric-only tests (soft_fabric_*_test.cpp):
// options and a device for the soft fabric, a raw TCP socket for playing a
// hostile peer on the listening port or on a connection, and waits.

#pragma once

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/logging.hpp"
#include "rdmactor/transport/link_params.hpp"
#include "test/transport/fabric_fixture.hpp"
#include "transport/soft/faults.hpp"
#include "transport/soft/limits.hpp"
#include "transport/soft/soft_fabric.hpp"
#include "transport/soft/wire.hpp"

namespace rdmactor::test {

namespace soft = rdmactor::transport::soft;
namespace wire = rdmactor::transport::soft::wire;

/// Reads the 8-byte word at `p`.
inline uint64_t word_at(const uint8_t* p) {
  uint64_t x = 0;
  std::memcpy(&x, p, 8);
  return x;
}

// -- helpers ------------------------------------------------------------------

inline options soft_options(uint32_t rnr_timeout_ms = 2000) {
  options opts;
  opts.fabric = "soft";
  opts.rnr_timeout_ms = rnr_timeout_ms;
  opts.connect_timeout_ms = 2000;
  set_log_level(env_or("RDMACTOR_TEST_LOG_LEVEL", "warn"));
  return opts;
}

inline transport::device_ptr open_soft(const options& opts) {
  return value_or_throw(soft::open_device(opts), "soft::open_device");
}

/// A blocking TCP socket for playing a hostile peer.
struct raw_socket {
  int fd = -1;

  raw_socket() = default;
  raw_socket(const raw_socket&) = delete;
  raw_socket& operator=(const raw_socket&) = delete;

  ~raw_socket() {
    if (fd >= 0)
      ::close(fd);
  }

  /// Connects to 127.0.0.1:port.
  /// Connects to 127.0.0.1:`port`, from `source` (a loopback address)
  /// when given.
  static std::unique_ptr<raw_socket> connect(uint16_t port,
                                             const char* source = nullptr) {
    auto s = std::make_unique<raw_socket>();
    s->fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (source != nullptr) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      ::inet_pton(AF_INET, source, &from.sin_addr);
      if (::bind(s->fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0)
        throw std::runtime_error("raw bind failed");
    }
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(s->fd, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0)
      throw std::runtime_error("raw connect failed");
    return s;
  }

  void write_all(const void* data, size_t n) {
    auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
      auto k = ::send(fd, p, n, MSG_NOSIGNAL);
      if (k <= 0)
        throw std::runtime_error("raw send failed");
      p += k;
      n -= static_cast<size_t>(k);
    }
  }

  /// Reads exactly n bytes within `timeout`; false on EOF or timeout.
  bool read_exact(void* data, size_t n, std::chrono::milliseconds timeout) {
    auto* p = static_cast<uint8_t*>(data);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (n > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0)
        return false;
      pollfd pfd{fd, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left)) <= 0)
        return false;
      auto k = ::recv(fd, p, n, 0);
      if (k <= 0)
        return false;
      p += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  }

  /// Returns true when the peer closes (EOF or reset) within `timeout`;
  /// bytes before that are discarded.
  bool wait_closed(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    uint8_t buf[4096];
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0)
        return false;
      pollfd pfd{fd, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left)) <= 0)
        return false;
      auto k = ::recv(fd, buf, sizeof(buf), 0);
      if (k <= 0)
        return true;
    }
  }

  /// Returns true when the peer has not closed: nothing to read (no EOF)
  /// right now.
  bool open_now() const {
    pollfd pfd{fd, POLLIN, 0};
    return ::poll(&pfd, 1, 0) == 0;
  }

  /// Sends a hello; returns the listener's hello (or nullopt).
  std::optional<wire::hello> handshake(wire::hello ours) {
    std::array<uint8_t, wire::hello_size> buf{};
    wire::encode(ours, buf.data());
    write_all(buf.data(), buf.size());
    if (!read_exact(buf.data(), buf.size(), 5s))
      return std::nullopt;
    wire::hello theirs;
    wire::decode(buf.data(), theirs);
    return theirs;
  }

  /// Sends a frame with `payload`.
  void send_frame(const wire::header& h, const void* payload = nullptr,
                  size_t len = 0) {
    std::array<uint8_t, wire::header_size> buf{};
    wire::encode(h, buf.data());
    write_all(buf.data(), buf.size());
    if (len > 0)
      write_all(payload, len);
  }

  /// Reads a hello and returns the refusal it carries (nullopt: no hello,
  /// or a hello that is not a refusal).
  std::optional<wire::refusal> read_refusal(std::chrono::milliseconds t) {
    std::array<uint8_t, wire::hello_size> buf{};
    wire::hello h;
    if (!read_exact(buf.data(), buf.size(), t)
        || wire::decode(buf.data(), h) != wire::hello_status::refused)
      return std::nullopt;
    return static_cast<wire::refusal>(h.rnr_timeout_ms);
  }

  /// Reads and decodes one frame header.
  std::optional<wire::header> read_header(std::chrono::milliseconds t = 5s) {
    std::array<uint8_t, wire::header_size> buf{};
    if (!read_exact(buf.data(), buf.size(), t))
      return std::nullopt;
    wire::header h;
    if (!wire::decode(buf.data(), h))
      return std::nullopt;
    return h;
  }
};

inline wire::hello default_hello() {
  wire::hello h;
  h.max_message_len_bytes = 64 * 1024;
  h.recv_depth = 16;
  h.rnr_timeout_ms = 2000;
  return h;
}

/// Accepts in the background while `fn` runs, returns the accepted QP.
template <class F>
transport::queue_pair_ptr accept_while(transport::listener& lst, F fn,
                                       std::chrono::milliseconds t = 5s) {
  auto fut
      = std::async(std::launch::async, [&lst, t] { return lst.accept(t); });
  fn();
  return value_or_throw(fut.get(), "accept");
}

} // namespace rdmactor::test
