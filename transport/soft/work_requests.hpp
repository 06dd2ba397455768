#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "rdmactor/transport/fabric.hpp"
#include "transport/soft/registration.hpp"
#include "transport/soft/wire.hpp"

namespace rdmactor::transport::soft {

/// A SEND, WRITE or READ the owner posted, waiting for the peer's response.
struct outstanding_request {
  uint64_t wr_id = 0;
  wc_opcode opcode = wc_opcode::send;
  bool signaled = true;
  uint32_t byte_len = 0;
  /// READ: where the response goes.
  range_list read_into;
  /// Set when a local sge failed validation: the request never goes on the
  /// wire; when it reaches the front it completes with this status and the
  /// queue pair enters the error state (as on hardware).
  std::optional<wc_status> local_error;
};

/// A receive the owner posted.
struct posted_recv {
  uint64_t wr_id = 0;
  range_list ranges;
  uint64_t capacity = 0;
  /// False when an sge failed validation: consuming it fails with
  /// local_protection_error.
  bool valid = true;
};

/// An inbound request the responder could not execute when it arrived (no
/// receive posted, or older requests waiting), with its payload.
struct inbound_request {
  wire::header hdr;
  std::vector<uint8_t> payload;
};

/// Builds a work completion.
inline work_completion make_wc(uint64_t wr_id, wc_status status,
                               wc_opcode opcode, uint32_t byte_len = 0,
                               std::optional<uint32_t> imm
                               = std::nullopt) noexcept {
  work_completion wc;
  wc.wr_id = wr_id;
  wc.status = status;
  wc.opcode = opcode;
  wc.byte_len = byte_len;
  wc.has_imm = imm.has_value();
  wc.imm_data = imm.value_or(0);
  return wc;
}

class protection_domain;

/// Checks the shape of a scatter/gather list: at most `max_sge` elements,
/// not null when there are any (`invalid_argument` otherwise).
caf::error check_sg(const sge* sg, size_t n);

/// Returns the sum of the lengths of `sg[0..n)`.
uint64_t total_of(const sge* sg, size_t n) noexcept;

/// Resolves the non-empty elements of `sg[0..n)` to registered ranges of
/// `pd` that grant `needed`, appending them to `out`; false when one lies
/// outside every such registration.
bool resolve_local(const protection_domain& pd, const sge* sg, size_t n,
                   uint32_t needed, range_list& out);

/// A receive of `sg[0..n)` as `post_recv` (of a queue pair or a shared
/// receive queue) queues it: resolved now, failing when consumed if an
/// element is not registered with local_write.
posted_recv make_posted_recv(const protection_domain& pd, uint64_t wr_id,
                             const sge* sg, size_t n);

/// Returns true when `h` consumes a receive on the responder (SEND, WRITE
/// with immediate).
constexpr bool consumes_receive(const wire::header& h) noexcept {
  return h.type == wire::frame_type::send
         || (h.type == wire::frame_type::write && h.has_imm);
}

} // namespace rdmactor::transport::soft
