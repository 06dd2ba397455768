#include "transport/soft/socket_ops.hpp"

#include <cerrno>
#include <cstring>
#include <memory>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include "common/fd_limit.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor::transport::soft {

namespace {

struct addrinfo_deleter {
  void operator()(addrinfo* p) const noexcept {
    ::freeaddrinfo(p);
  }
};

using addrinfo_ptr = std::unique_ptr<addrinfo, addrinfo_deleter>;

std::string endpoint(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos)
    return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

caf::expected<addrinfo_ptr> resolve(const std::string& host, uint16_t port,
                                    bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  auto port_str = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(),
                         port_str.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr)
    return make_error(errc::invalid_address,
                      "cannot resolve '" + host + "': " + ::gai_strerror(rc)
                          + "; use a numeric address or a resolvable name");
  return addrinfo_ptr{res};
}

std::string errno_text(int err) {
  return describe_fd_error(err);
}

} // namespace

void tune_socket(int fd) noexcept {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

caf::expected<listening_socket> listen_tcp(const std::string& host,
                                           uint16_t port) {
  auto res = resolve(host, port, true);
  if (!res)
    return res.error();
  std::string last_error = "no address";
  for (auto* ai = res->get(); ai != nullptr; ai = ai->ai_next) {
    unique_fd fd{::socket(ai->ai_family,
                          ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                          ai->ai_protocol)};
    if (!fd) {
      last_error = "socket: " + errno_text(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last_error = "bind: " + errno_text(errno);
      continue;
    }
    if (::listen(fd.get(), 128) != 0) {
      last_error = "listen: " + errno_text(errno);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
      last_error = "getsockname: " + errno_text(errno);
      continue;
    }
    uint16_t bound = 0;
    if (ss.ss_family == AF_INET)
      bound = ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    else if (ss.ss_family == AF_INET6)
      bound = ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    return listening_socket{std::move(fd), bound};
  }
  return make_error(errc::connect_failed,
                    "cannot listen on " + endpoint(host, port) + ": "
                        + last_error + "; pick a free port or a local address");
}

caf::expected<unique_fd> connect_tcp(const std::string& host, uint16_t port,
                                     time_point deadline) {
  auto res = resolve(host, port, false);
  if (!res)
    return res.error();
  std::string last_error = "no address";
  bool timed_out = false;
  for (auto* ai = res->get(); ai != nullptr; ai = ai->ai_next) {
    unique_fd fd{::socket(ai->ai_family,
                          ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                          ai->ai_protocol)};
    if (!fd) {
      // Out of descriptors here: not the peer's fault, and no other
      // address would do better.
      if (errno == EMFILE || errno == ENFILE)
        return make_error(errc::connect_failed,
                          "cannot connect to " + endpoint(host, port)
                              + ": socket: " + errno_text(errno));
      last_error = "socket: " + errno_text(errno);
      continue;
    }
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last_error = errno_text(errno);
        continue;
      }
      pollfd p{fd.get(), POLLOUT, 0};
      int rc;
      do {
        rc = ::poll(&p, 1, poll_timeout_ms(deadline, clock_type::now()));
      } while (rc < 0 && errno == EINTR);
      if (rc == 0) {
        timed_out = true;
        break;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      if (rc < 0
          || ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
      if (err != 0) {
        last_error = errno_text(err);
        continue;
      }
    }
    tune_socket(fd.get());
    return fd;
  }
  if (timed_out)
    return make_error(errc::connect_timeout,
                      "no TCP connection to " + endpoint(host, port)
                          + " within the timeout; check that the peer is "
                            "reachable and listening");
  return make_error(errc::connect_failed,
                    "cannot connect to " + endpoint(host, port) + ": "
                        + last_error + "; check that the peer is listening");
}

caf::error send_all(int fd, const void* data, size_t n, time_point deadline) {
  auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    auto k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      return make_error(errc::connect_failed,
                        "send during the handshake failed: "
                            + errno_text(errno));
    pollfd pfd{fd, POLLOUT, 0};
    auto now = clock_type::now();
    if (now >= deadline)
      return make_error(errc::connect_timeout,
                        "handshake not sent within the timeout");
    if (::poll(&pfd, 1, poll_timeout_ms(deadline, now)) < 0 && errno != EINTR)
      return make_error(errc::connect_failed,
                        "poll during the handshake failed: "
                            + errno_text(errno));
  }
  return {};
}

caf::error recv_all(int fd, void* data, size_t n, time_point deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    auto k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0)
      return make_error(errc::handshake_failed,
                        "the peer closed the connection during the "
                        "handshake without answering: it is shutting down, "
                        "dropped the handshake, or is not an rdmactor "
                        "soft-fabric endpoint");
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return make_error(errc::connect_failed,
                        "receive during the handshake failed: "
                            + errno_text(errno));
    pollfd pfd{fd, POLLIN, 0};
    auto now = clock_type::now();
    if (now >= deadline)
      return make_error(errc::connect_timeout,
                        "no handshake from the peer within the timeout; "
                        "is it an rdmactor soft-fabric listener that "
                        "accepts connections?");
    if (::poll(&pfd, 1, poll_timeout_ms(deadline, now)) < 0 && errno != EINTR)
      return make_error(errc::connect_failed,
                        "poll during the handshake failed: "
                            + errno_text(errno));
  }
  return {};
}

std::string peer_name_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    return "unknown peer";
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
    return std::string{buf} + ":" + std::to_string(ntohs(sin->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof(buf));
    return "[" + std::string{buf}
           + "]:" + std::to_string(ntohs(sin6->sin6_port));
  }
  return "unknown peer";
}

std::string address_part(const std::string& peer_name) {
  auto colon = peer_name.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return peer_name;
  return peer_name.substr(0, colon);
}

} // namespace rdmactor::transport::soft
