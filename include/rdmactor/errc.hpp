#pragma once

#include <cstdint>
#include <ostream>

namespace rdmactor {

/// Project-wide error codes; every failure a user can see carries one.
///
/// The enum is free of CAF so that `protocol/` can use it; `rdmactor/error.hpp`
/// registers it with CAF as the error category `rdmactor`.  Value 0 is
/// reserved (CAF treats code 0 as "no error").
enum class errc : uint8_t {
  none = 0,
  // -- frame codec --------------------------------------------------------
  truncated_frame = 1,  ///< fewer bytes arrived than the frame header needs
  frame_too_large,      ///< header or frame exceeds the negotiated maximum
  malformed_message,    ///< bytes do not parse as an agent Message
  unknown_message_kind, ///< a oneof case this version does not know
  payload_mismatch,     ///< SendData.len disagrees with the payload
  buffer_too_small,     ///< encode: caller's buffer cannot hold the frame
  // -- fabric / connection ------------------------------------------------
  fabric_unavailable = 20, ///< no RDMA device / fabric cannot be opened
  device_not_found,        ///< the configured device or port does not exist
  registration_failed,     ///< memory registration was refused
  connect_failed,          ///< TCP/rdma_cm connect or listen failed
  connect_timeout,         ///< the connection was not established in time
  handshake_failed,        ///< the peer is not an rdmactor peer
  version_mismatch,        ///< peer speaks another protocol version
  invalid_address,         ///< HOST:PORT did not parse or resolve
  // -- work completions (mirror ibv_wc_status) ----------------------------
  local_length_error = 40,
  local_protection_error,
  remote_access_error,
  remote_operation_error,
  rnr_retry_exceeded,
  transport_retry_exceeded,
  work_request_flushed,
  completion_error, ///< any other completion status
  // -- connection state ---------------------------------------------------
  qp_error = 60,   ///< the queue pair is in the error state
  peer_gone,       ///< the peer disconnected or died
  request_timeout, ///< no answer within request_timeout_ms
  closed,          ///< the local endpoint was closed
  // -- memory / agent protocol --------------------------------------------
  invalid_layout = 80,  ///< zero or non-power-of-two alignment, size 0
  size_limit,           ///< size over max_alloc_bytes
  out_of_memory,        ///< the allocator could not satisfy a request
  quota_exceeded,       ///< a per-peer limit was hit
  unknown_token,        ///< token not in the owned table
  already_sent,         ///< the memory region was sent before
  length_mismatch,      ///< local and remote lengths differ
  out_of_bounds,        ///< slice or access outside a region
  invalid_argument,     ///< an argument is outside its documented range
  peer_error,           ///< the peer answered with an error status
  internal_error,       ///< a bug in rdmactor: please report it
  misaligned,           ///< an atomic's word is not 8-byte aligned
  unsupported,          ///< the fabric or device lacks the feature
  peer_closed,          ///< the peer closed the connection (graceful close)
  not_negotiated,       ///< the peer's Hello did not offer the feature
  lease_expired,        ///< the lease of a lent memory region ended
  unknown_actor,        ///< no actor published under the name / id
  serialization_failed, ///< a message type is unregistered or mismatched
  handler_failed,       ///< a data handler threw; it was detached
  unexpected_message,   ///< the receiving actor's interface does not take it
};

/// Returns the enumerator's name, e.g. "peer_gone".
const char* to_string(errc x) noexcept;

/// Returns a sentence naming the cause and what to do about it.
const char* describe(errc x) noexcept;

/// Prints the enumerator's name (for test frameworks and logs).
inline std::ostream& operator<<(std::ostream& out, errc x) {
  return out << to_string(x);
}

} // namespace rdmactor
