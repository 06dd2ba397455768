#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

#include <caf/expected.hpp>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

/// rdma_cm helpers of the verbs fabric (internal).
namespace rdmactor::transport::verbs {

using clock = std::chrono::steady_clock;

/// Returns "ENOSYS (Function not implemented)" for an errno value.
std::string errno_text(int err);

/// Returns milliseconds left until `deadline`, at least 0.
int remaining_ms(clock::time_point deadline) noexcept;

/// Puts `fd` into non-blocking mode; false on failure (errno set).
bool set_nonblocking(int fd) noexcept;

/// A resolved socket address.
struct socket_address {
  sockaddr_storage storage{};
  socklen_t length = 0;

  sockaddr* get() noexcept {
    return reinterpret_cast<sockaddr*>(&storage);
  }
};

/// Resolves `host:port` (numeric or DNS name; empty host with `passive`:
/// any address) with getaddrinfo.  Fails with `invalid_address`.
caf::expected<socket_address> resolve_address(const std::string& host,
                                              uint16_t port, bool passive);

/// Formats an IPv4/IPv6 socket address as "10.0.0.2:7471" / "[::1]:7471".
std::string to_string(const sockaddr* addr);

/// The parts of an rdma_cm event this fabric uses, copied out so that the
/// event can be acknowledged at once.
struct cm_event_info {
  rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
  int status = 0;
  rdma_cm_id* id = nullptr;
  rdma_cm_id* listen_id = nullptr;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  /// Private data as delivered (padded by the transport); untrusted.
  std::array<uint8_t, 256> private_data{};
  size_t private_data_len = 0;
};

/// Copies the fields of `ev` that the fabric uses.
cm_event_info copy_event(const rdma_cm_event& ev);

/// Waits until `deadline` for the next event on `channel` (whose fd is
/// non-blocking), copies and acknowledges it.  When `wake_fd` >= 0 and
/// becomes readable, returns `errc::closed`; at the deadline,
/// `errc::connect_timeout`.
caf::expected<cm_event_info> next_event(rdma_event_channel* channel,
                                        int wake_fd,
                                        clock::time_point deadline);

/// Describes an IB CM reject reason (RDMA_CM_EVENT_REJECTED status).
std::string reject_reason(int status);

} // namespace rdmactor::transport::verbs
