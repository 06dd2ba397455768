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

/// Returns true when `h` consumes a receive on the responder (SEND, WRITE
/// with immediate).
constexpr bool consumes_receive(const wire::header& h) noexcept {
  return h.type == wire::frame_type::send
         || (h.type == wire::frame_type::write && h.has_imm);
}

} // namespace rdmactor::transport::soft
