#include "apps/bench/tcp_baseline.hpp"

#include <cerrno>
#include <cstring>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include "apps/bench/run_progress.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor::bench::tcp {

namespace {

/// Payload length (little-endian 32 bits) and kind.
constexpr size_t header_len = 5;
constexpr uint8_t kind_ping = 0;
constexpr uint8_t kind_push = 1;
/// What the server reads into at once, and the largest payload it takes.
constexpr size_t read_chunk = 1 << 20;
constexpr uint32_t max_payload = 64u << 20;

void put_header(uint8_t* h, uint32_t len, uint8_t kind) {
  for (int i = 0; i < 4; ++i)
    h[i] = static_cast<uint8_t>(len >> (8 * i));
  h[4] = kind;
}

uint32_t len_of(const uint8_t* h) {
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i)
    len |= uint32_t{h[i]} << (8 * i);
  return len;
}

/// Writes all of `iov` (blocking); false on an error or a closed peer.
bool write_all(int fd, iovec* iov, int n) {
  while (n > 0) {
    auto w = ::writev(fd, iov, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    auto left = static_cast<size_t>(w);
    while (n > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --n;
    }
    if (n > 0) {
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return true;
}

/// Reads exactly `n` bytes (blocking); false on an error or a closed peer.
bool read_exact(int fd, uint8_t* buf, size_t n) {
  while (n > 0) {
    auto r = ::read(fd, buf, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    buf += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

enum class served { peer_left, stop, error };

/// Serves one connection: every complete message of one read is answered
/// in one write.
served serve_connection(int fd, int stop_fd) {
  std::vector<uint8_t> in(read_chunk);
  std::vector<uint8_t> out;
  size_t have = 0;
  for (;;) {
    pollfd p[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    if (::poll(p, stop_fd >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR)
        continue;
      return served::error;
    }
    if (stop_fd >= 0 && p[1].revents != 0)
      return served::stop;
    if (have == in.size())
      in.resize(in.size() * 2);
    auto r = ::read(fd, in.data() + have, in.size() - have);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return served::peer_left;
    have += static_cast<size_t>(r);
    size_t off = 0;
    while (have - off >= header_len) {
      auto len = len_of(in.data() + off);
      if (len > max_payload)
        return served::peer_left; // not one of ours: drop the connection
      auto whole = header_len + size_t{len};
      if (have - off < whole) {
        if (in.size() < whole)
          in.resize(whole);
        break;
      }
      if (in[off + 4] == kind_ping) {
        out.insert(out.end(), in.begin() + off, in.begin() + off + whole);
      } else {
        uint64_t n = len;
        auto* b = reinterpret_cast<const uint8_t*>(&n);
        out.insert(out.end(), b, b + sizeof(n));
      }
      off += whole;
    }
    std::memmove(in.data(), in.data() + off, have - off);
    have -= off;
    if (!out.empty()) {
      iovec iov{out.data(), out.size()};
      if (!write_all(fd, &iov, 1))
        return served::peer_left;
      out.clear();
    }
  }
}

caf::error sys_error(const char* what) {
  return make_error(errc::internal_error,
                    std::string{what} + ": " + std::strerror(errno));
}

/// The IPv4 socket address of `host` (an address, or localhost) and `port`.
caf::expected<sockaddr_in> address_of(const std::string& host, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  auto ip
      = host.empty() || host == "localhost" ? std::string{"127.0.0.1"} : host;
  if (::inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1)
    return make_error(errc::invalid_address,
                      "--baseline=tcp needs an IPv4 address, not '" + host
                          + "'");
  return sa;
}

/// A TCP socket for `host`:`port`, whose address goes to `sa`.
caf::expected<int> tcp_socket(const std::string& host, uint16_t port,
                              sockaddr_in& sa) {
  auto addr = address_of(host, port);
  if (!addr)
    return addr.error();
  sa = *addr;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return sys_error("socket");
  return fd;
}

caf::expected<int> connect_to(const std::string& host, uint16_t port) {
  sockaddr_in sa{};
  auto sock = tcp_socket(host, port, sa);
  if (!sock)
    return sock.error();
  int fd = *sock;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    auto err
        = make_error(errc::connect_failed,
                     "cannot reach the tcp baseline's server at " + host + ":"
                         + std::to_string(port) + ": " + std::strerror(errno));
    ::close(fd);
    return err;
  }
  no_delay(fd);
  return fd;
}

/// One run on its own connection; the outcome goes to `chan`.
void run_client(const std::string& host, uint16_t port, const run_spec& spec,
                const run_channel_ptr& chan) {
  run_progress run{spec, chan};
  if (spec.op != bench_op::send) {
    run.fail(make_error(errc::invalid_argument,
                        "--baseline=tcp runs --op=send (and --op=actor, as "
                        "send) only"));
    return;
  }
  if (spec.size > max_payload) {
    run.fail(make_error(errc::size_limit,
                        "--baseline=tcp takes sizes up to 64 MiB"));
    return;
  }
  auto fd = connect_to(host, port);
  if (!fd) {
    run.fail(fd.error());
    return;
  }
  auto len = static_cast<uint32_t>(spec.size);
  std::vector<uint8_t> payload(len, sink_flag);
  uint8_t header[header_len];
  bool ok = true;
  run.start_clock();
  if (spec.mode == bench_mode::lat) {
    put_header(header, len, kind_ping);
    std::vector<uint8_t> back(header_len + size_t{len});
    while (ok && run.more_to_issue()) {
      auto t0 = run_progress::clock_type::now();
      iovec iov[2] = {{header, header_len}, {payload.data(), payload.size()}};
      run.issued();
      ok = write_all(*fd, iov, len > 0 ? 2 : 1)
           && read_exact(*fd, back.data(), back.size());
      if (ok)
        run.complete(run_progress::micros_since(t0) / 2);
    }
  } else {
    put_header(header, len, kind_push);
    uint8_t acks[8 * 1024];
    size_t have = 0;
    while (ok && !run.all_completed()) {
      while (run.more_to_issue()
             && run.completed() + spec.window > run.issued_count()) {
        iovec iov[2] = {{header, header_len}, {payload.data(), payload.size()}};
        if (!write_all(*fd, iov, len > 0 ? 2 : 1)) {
          ok = false;
          break;
        }
        run.issued();
      }
      if (!ok)
        break;
      auto r = ::read(*fd, acks + have, sizeof(acks) - have);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0) {
        ok = false;
        break;
      }
      have += static_cast<size_t>(r);
      auto whole = have / 8;
      for (size_t i = 0; i < whole; ++i)
        run.complete(0);
      std::memmove(acks, acks + whole * 8, have - whole * 8);
      have -= whole * 8;
    }
  }
  ::close(*fd);
  if (!ok)
    run.fail(make_error(errc::peer_gone,
                        "the tcp baseline's server closed the connection"));
  else
    run.finish_if_done();
}

} // namespace

int serve(int listen_fd, int stop_fd) {
  for (;;) {
    pollfd p[2] = {{listen_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    if (::poll(p, stop_fd >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR)
        continue;
      return 1;
    }
    if (stop_fd >= 0 && p[1].revents != 0)
      return 0;
    int fd = ::accept(listen_fd, nullptr, nullptr);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      return 1;
    }
    no_delay(fd);
    auto how = serve_connection(fd, stop_fd);
    ::close(fd);
    if (how == served::stop)
      return 0;
    if (how == served::error)
      return 1;
  }
}

caf::expected<int> listen_on(const std::string& host, uint16_t port,
                             uint16_t& bound_port) {
  sockaddr_in sa{};
  auto sock = tcp_socket(host, port, sa);
  if (!sock)
    return sock.error();
  int fd = *sock;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0
      || ::listen(fd, 16) != 0) {
    auto err = sys_error(
        ("cannot listen on " + host + ":" + std::to_string(port)).c_str());
    ::close(fd);
    return err;
  }
  socklen_t sl = sizeof(sa);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &sl);
  bound_port = ntohs(sa.sin_port);
  return fd;
}

caf::expected<forked_server> fork_server() {
  return fork_server_process("tcp", [](int port_fd, int control_fd) {
    uint16_t port = 0;
    auto fd = listen_on("127.0.0.1", 0, port);
    if (!fd)
      port = 0;
    if (::write(port_fd, &port, sizeof(port)) != sizeof(port) || port == 0)
      return 1;
    ::close(port_fd);
    auto rc = serve(*fd, control_fd);
    ::close(*fd);
    return rc;
  });
}

caf::actor spawn_driver(caf::actor_system& sys, std::string host, uint16_t port,
                        run_spec spec, run_channel_ptr chan) {
  // Detached: the driver blocks on its socket, on a thread of its own.
  return sys.spawn<caf::detached>(
      [host = std::move(host), port, spec,
       chan = std::move(chan)](caf::event_based_actor* self) -> caf::behavior {
        run_client(host, port, spec, chan);
        self->quit();
        return {};
      });
}

} // namespace rdmactor::bench::tcp
