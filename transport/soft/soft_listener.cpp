#include "transport/soft/soft_listener.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <poll.h>
#include <sys/socket.h>

#include "common/fd_limit.hpp"
#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "rdmactor/error.hpp"
#include "transport/soft/handshake.hpp"
#include "transport/soft/limits.hpp"
#include "transport/soft/socket_ops.hpp"
#include "transport/soft/soft_device.hpp"

namespace rdmactor::transport::soft {

caf::expected<std::unique_ptr<listener>>
soft_listener::make(std::shared_ptr<soft_device> dev, unique_fd sock,
                    uint16_t port, const conn_params& offer) {
  auto wake = event_fd::make();
  if (!wake)
    return wake.error();
  return std::unique_ptr<listener>{new soft_listener(
      std::move(dev), std::move(sock), port, offer, std::move(*wake))};
}

soft_listener::soft_listener(std::shared_ptr<soft_device> dev, unique_fd sock,
                             uint16_t port, const conn_params& offer,
                             event_fd wake)
    : dev_(std::move(dev)), sock_(std::move(sock)), port_(port), offer_(offer),
      wake_(std::move(wake)) {
  // nop
}

void soft_listener::close() {
  if (closed_.exchange(true))
    return;
  ::shutdown(sock_.get(), SHUT_RDWR);
  wake_.signal();
}

caf::expected<queue_pair_ptr>
soft_listener::accept(std::chrono::milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  std::vector<pollfd> fds;
  for (;;) {
    if (closed_.load()) {
      pending_.clear();
      return make_error(errc::closed, "the listener on port "
                                          + std::to_string(port_)
                                          + " was closed");
    }
    auto now = clock_type::now();
    for (size_t i = pending_.size(); i > 0; --i)
      if (pending_[i - 1].deadline <= now)
        drop(i - 1,
             "no handshake within connect_timeout_ms="
                 + std::to_string(dev_->opts().connect_timeout_ms),
             wire::refusal::timed_out);
    if (now >= deadline)
      return make_error(errc::connect_timeout,
                        "no peer connected to port " + std::to_string(port_)
                            + " within " + std::to_string(timeout.count())
                            + " ms");
    if (backoff_until_ && *backoff_until_ <= now)
      backoff_until_.reset();
    auto next = deadline;
    fds.clear();
    fds.push_back(pollfd{wake_.fd(), POLLIN, 0});
    fds.push_back(pollfd{backoff_until_ ? -1 : sock_.get(), POLLIN, 0});
    if (backoff_until_)
      next = std::min(next, *backoff_until_);
    for (auto& p : pending_) {
      fds.push_back(pollfd{p.fd.get(), POLLIN, 0});
      next = std::min(next, p.deadline);
    }
    auto rc = ::poll(fds.data(), fds.size(), poll_timeout_ms(next, now));
    if (rc < 0) {
      if (errno == EINTR)
        continue;
      return make_error(errc::connect_failed,
                        std::string{"listener poll failed: "}
                            + std::strerror(errno));
    }
    if (fds[0].revents != 0) {
      wake_.drain();
      continue;
    }
    // Handshakes first: the newest index first, so erasing keeps the rest.
    for (size_t i = pending_.size(); i > 0; --i) {
      if (fds[i + 1].revents == 0)
        continue;
      if (auto qp = advance(i - 1))
        return std::move(*qp);
    }
    if (fds[1].revents != 0)
      take_connections(clock_type::now());
  }
}

void soft_listener::take_connections(time_point now) {
  for (size_t n = 0; n < limits::max_pending_handshakes; ++n) {
    int fd = ::accept4(sock_.get(), nullptr, nullptr,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS
          || errno == ENOMEM) {
        warn_within("connections",
                    "soft listener :" + std::to_string(port_)
                        + ": cannot accept: " + describe_fd_error(errno)
                        + "; pausing 100 ms");
        backoff_until_ = now + std::chrono::milliseconds{100};
      }
      return;
    }
    unique_fd sock{fd};
    tune_socket(sock.get());
    pending_handshake p;
    p.peer = peer_name_of(sock.get());
    p.addr = address_part(p.peer);
    admit(p.addr);
    p.fd = std::move(sock);
    p.deadline
        = now + std::chrono::milliseconds{dev_->opts().connect_timeout_ms};
    pending_.push_back(std::move(p));
  }
}

void soft_listener::warn_dropped(const std::string& peer,
                                 const std::string& why) const {
  warn_within("connections", "soft listener :" + std::to_string(port_)
                                 + ": dropped " + peer + ": " + why);
}

void soft_listener::admit(const std::string& addr) {
  auto from_addr = static_cast<size_t>(std::count_if(
      pending_.begin(), pending_.end(),
      [&](const pending_handshake& p) { return p.addr == addr; }));
  if (from_addr >= limits::max_pending_handshakes_per_address) {
    drop(victim_of(addr),
         "too many handshakes in progress from " + addr + " (at most "
             + std::to_string(limits::max_pending_handshakes_per_address) + ")",
         wire::refusal::busy);
    return;
  }
  if (pending_.size() < limits::max_pending_handshakes)
    return;
  // Full: the address with the most handshakes in progress gives one up.
  std::string heaviest;
  size_t most = 0;
  for (auto& p : pending_) {
    auto n = static_cast<size_t>(std::count_if(
        pending_.begin(), pending_.end(),
        [&](const pending_handshake& q) { return q.addr == p.addr; }));
    if (n > most) {
      most = n;
      heaviest = p.addr;
    }
  }
  drop(victim_of(heaviest),
       "too many handshakes in progress (at most "
           + std::to_string(limits::max_pending_handshakes) + "), "
           + std::to_string(most) + " of them from " + heaviest,
       wire::refusal::busy);
}

size_t soft_listener::victim_of(const std::string& addr) const {
  std::optional<size_t> oldest;
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i].addr != addr)
      continue;
    if (pending_[i].got == 0)
      return i; // the oldest silent one
    if (!oldest)
      oldest = i;
  }
  return oldest.value_or(0);
}

void soft_listener::drop(size_t index, const std::string& why,
                         std::optional<wire::refusal> why_code) {
  auto& p = pending_[index];
  if (why_code) {
    // Best effort, never blocking: the client learns that it was dropped.
    std::array<uint8_t, wire::hello_size> bytes{};
    wire::encode(wire::refusal_hello(*why_code), bytes.data());
    [[maybe_unused]] auto n = ::send(p.fd.get(), bytes.data(), bytes.size(),
                                     MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  warn_dropped(p.peer, why);
  pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(index));
}

std::optional<queue_pair_ptr> soft_listener::advance(size_t index) {
  auto& p = pending_[index];
  size_t got = 0;
  int err = 0;
  for (;;) {
    auto k = ::recv(p.fd.get(), p.buf.data() + p.got, p.buf.size() - p.got,
                    MSG_DONTWAIT);
    if (k > 0) {
      got = static_cast<size_t>(k);
      break;
    }
    if (k == 0) {
      drop(index, "closed during the handshake");
      return std::nullopt;
    }
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return std::nullopt;
    err = errno;
    drop(index, std::string{"receive failed: "} + std::strerror(err));
    return std::nullopt;
  }
  p.got += got;
  if (p.got < p.buf.size())
    return std::nullopt;
  wire::hello theirs;
  auto st = wire::decode(p.buf.data(), theirs);
  // Only an offer starts a connection: a refusal (both offers 0) is no
  // offer, and an offer out of range (a receive depth below what the data
  // path needs included) would fail later.
  if (st == wire::hello_status::refused) {
    drop(index, "a refusal hello instead of an offer");
    return std::nullopt;
  }
  if (st == wire::hello_status::bad_magic
      || st == wire::hello_status::bad_params) {
    drop(index, describe(st));
    return std::nullopt;
  }
  // Answer with our hello: on a version mismatch the peer learns ours and
  // reports it, then we drop the connection.
  std::array<uint8_t, wire::hello_size> ours{};
  wire::encode(dev_->hello_for(offer_), ours.data());
  auto sent = ::send(p.fd.get(), ours.data(), ours.size(),
                     MSG_DONTWAIT | MSG_NOSIGNAL);
  if (st == wire::hello_status::bad_version) {
    drop(index, "protocol version " + std::to_string(theirs.version)
                    + ", we speak " + std::to_string(wire::version));
    return std::nullopt;
  }
  if (sent != static_cast<ssize_t>(ours.size())) {
    drop(index, "cannot send our hello");
    return std::nullopt;
  }
  auto sock = std::move(p.fd);
  auto peer = std::move(p.peer);
  pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(index));
  auto qp = dev_->start_queue_pair(
      std::move(sock), peer, negotiate(offer_, theirs), theirs.rnr_timeout_ms);
  if (!qp) {
    warn_dropped(peer, render(qp.error()));
    return std::nullopt;
  }
  return std::move(*qp);
}

} // namespace rdmactor::transport::soft
