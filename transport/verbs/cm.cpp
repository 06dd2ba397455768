#include "transport/verbs/cm.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>

#include "common/fd_limit.hpp"
#include "rdmactor/error.hpp"
#include "transport/verbs/raii.hpp"

namespace rdmactor::transport::verbs {

std::string errno_text(int err) {
  std::string out;
  if (auto name = strerrorname_np(err))
    out = name;
  else
    out = "errno " + std::to_string(err);
  out += " (";
  out += describe_fd_error(err);
  out += ")";
  return out;
}

int remaining_ms(clock::time_point deadline) noexcept {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

bool set_nonblocking(int fd) noexcept {
  auto flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

caf::expected<socket_address> resolve_address(const std::string& host,
                                              uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  auto port_str = std::to_string(port);
  auto node = host.empty() && passive ? nullptr : host.c_str();
  auto rc = ::getaddrinfo(node, port_str.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr)
    return make_error(errc::invalid_address,
                      "cannot resolve '" + host + "': " + gai_strerror(rc)
                          + "; use an IP address of an RDMA-capable "
                            "interface");
  socket_address out;
  auto len = std::min<size_t>(res->ai_addrlen, sizeof(out.storage));
  std::memcpy(&out.storage, res->ai_addr, len);
  out.length = static_cast<socklen_t>(len);
  ::freeaddrinfo(res);
  return out;
}

std::string to_string(const sockaddr* addr) {
  if (addr == nullptr)
    return "?";
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    auto in = reinterpret_cast<const sockaddr_in*>(addr);
    ::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
    return std::string{buf} + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (addr->sa_family == AF_INET6) {
    auto in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
    return "[" + std::string{buf}
           + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "<address family " + std::to_string(addr->sa_family) + ">";
}

cm_event_info copy_event(const rdma_cm_event& ev) {
  cm_event_info out;
  out.type = ev.event;
  out.status = ev.status;
  out.id = ev.id;
  out.listen_id = ev.listen_id;
  auto& conn = ev.param.conn;
  out.responder_resources = conn.responder_resources;
  out.initiator_depth = conn.initiator_depth;
  if (conn.private_data != nullptr) {
    out.private_data_len
        = std::min<size_t>(conn.private_data_len, out.private_data.size());
    std::memcpy(out.private_data.data(), conn.private_data,
                out.private_data_len);
  }
  return out;
}

caf::expected<cm_event_info> next_event(rdma_event_channel* channel,
                                        int wake_fd,
                                        clock::time_point deadline) {
  for (;;) {
    rdma_cm_event* raw = nullptr;
    if (rdma_get_cm_event(channel, &raw) == 0) {
      cm_event_ptr ev{raw};
      return copy_event(*ev);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return make_error(errc::connect_failed,
                        "rdma_get_cm_event failed: " + errno_text(errno));
    pollfd fds[2] = {{channel->fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    auto wait = remaining_ms(deadline);
    if (wait == 0)
      return make_error(errc::connect_timeout);
    auto rc = ::poll(fds, wake_fd >= 0 ? 2 : 1, wait);
    if (rc < 0 && errno != EINTR)
      return make_error(errc::connect_failed,
                        "poll on the rdma_cm channel failed: "
                            + errno_text(errno));
    if (wake_fd >= 0 && fds[1].revents != 0)
      return make_error(errc::closed, "the listener was closed");
  }
}

std::string reject_reason(int status) {
  // IB CM reject reasons (IBA 12.6.7.2); RoCE uses the IB CM.
  switch (status) {
    case 1:
      return "no QP available on the peer (IB CM reason 1)";
    case 8:
      return "nothing listens on that port (IB CM reason 8: invalid service "
             "ID)";
    case 28:
      return "the peer application refused (IB CM reason 28)";
    default:
      if (status < 0)
        return errno_text(-status);
      return "IB CM reject reason " + std::to_string(status);
  }
}

} // namespace rdmactor::transport::verbs
