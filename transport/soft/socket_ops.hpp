#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "transport/soft/deadline.hpp"
#include "transport/soft/unique_fd.hpp"

/// TCP helpers of the soft fabric.  Every socket they return is
/// non-blocking and close-on-exec; every wait is bounded by a deadline.
namespace rdmactor::transport::soft {

/// A listening socket and the port it is bound to.
struct listening_socket {
  unique_fd fd;
  uint16_t port = 0;
};

/// Listens on `host:port` (port 0: a free port).  Fails with
/// `invalid_address` when the host does not resolve and `connect_failed`
/// when no address can be bound.
caf::expected<listening_socket> listen_tcp(const std::string& host,
                                           uint16_t port);

/// Connects to `host:port` before `deadline`, trying every address the
/// host resolves to.  The socket has TCP_NODELAY set.  Fails with
/// `invalid_address`, `connect_failed` or `connect_timeout`.
caf::expected<unique_fd> connect_tcp(const std::string& host, uint16_t port,
                                     time_point deadline);

/// Writes `data[0..n)` to the non-blocking socket `fd` before `deadline`.
/// Fails with `connect_timeout` or `connect_failed`.
caf::error send_all(int fd, const void* data, size_t n, time_point deadline);

/// Reads exactly `n` bytes from the non-blocking socket `fd` before
/// `deadline`.  Fails with `connect_timeout`, `handshake_failed` (the peer
/// closed the connection) or `connect_failed`.
caf::error recv_all(int fd, void* data, size_t n, time_point deadline);

/// Configures a freshly accepted or connected socket: non-blocking,
/// TCP_NODELAY.
void tune_socket(int fd) noexcept;

/// Returns "ADDR:PORT" ("[ADDR]:PORT" for IPv6) of the peer of `fd`, or
/// "unknown peer".
std::string peer_name_of(int fd);

/// Returns the address of a `peer_name_of` name without its port
/// ("10.0.0.1:4000" -> "10.0.0.1", "[::1]:4000" -> "[::1]").
std::string address_part(const std::string& peer_name);

} // namespace rdmactor::transport::soft
