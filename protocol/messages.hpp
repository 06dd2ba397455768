#pragma once

#include "protocol/agent.pb.h"
#include "rdmactor/errc.hpp"
#include "rdmactor/mr_token.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rdmactor::protocol {

// -- tokens -----------------------------------------------------------------

/// Builds a token for the region [addr, addr + len) accessible with `rkey`.
MrToken make_token(uint64_t addr, uint64_t len, uint32_t rkey);

/// The wire's form of `token`.
MrToken make_token(const mr_token& token);

/// The region a token from the wire names (its fields as they came: the
/// caller checks them).
mr_token token_of(const MrToken& token);

// -- requests ---------------------------------------------------------------

/// Builds a request asking the peer to allocate `size` bytes aligned to
/// `align` on our behalf.
Message make_alloc_mr(uint64_t request_id, uint64_t size, uint64_t align);

/// Builds a request telling the peer to release the region it allocated for
/// us.
Message make_release_mr(uint64_t request_id, const MrToken& token);

/// Builds a request handing `token` to the peer, with the application
/// `tag` (0: none; set only for a peer that offered EXT_MR_TAGS).
Message make_send_mr(uint64_t request_id, SendMR::Kind kind,
                     const MrToken& token, uint64_t tag = 0,
                     uint32_t lease_ms = 0);

/// Builds a request to extend the lease of `token` by `lease_ms`.
Message make_renew_lease(uint64_t request_id, const MrToken& token,
                         uint32_t lease_ms);

/// Builds the answer to a RenewLease (`lease_ms` granted when OK).
Message make_renew_lease_response(uint64_t request_id, Status status,
                                  std::string detail, uint32_t lease_ms = 0);

/// Builds a request announcing `len` payload bytes behind the Message.
Message make_send_data(uint64_t request_id, uint64_t len);

/// Builds a SendData that carries the immediate value `imm`.
Message make_send_data(uint64_t request_id, uint64_t len, uint32_t imm);

/// Builds a rendezvous SendData: the `source.len` bytes stay in the
/// sender's memory `source` (registered for remote read) for the receiver
/// to read; with `imm` it carries that immediate value as well.
Message make_send_data_rendezvous(uint64_t request_id, const MrToken& source,
                                  std::optional<uint32_t> imm = std::nullopt);

// -- responses --------------------------------------------------------------

/// Builds the answer to an AllocMR; `token` is stored only if `status` is
/// OK.
Message make_alloc_mr_response(uint64_t request_id, Status status,
                               std::string detail, const MrToken& token = {});

/// Builds the answer to a ReleaseMR.
Message make_release_mr_response(uint64_t request_id, Status status,
                                 std::string detail);

/// Builds the answer to a SendMR.
Message make_send_mr_response(uint64_t request_id, Status status,
                              std::string detail);

/// Builds the answer to a SendData.
Message make_send_data_response(uint64_t request_id, Status status,
                                std::string detail);

/// Returns the status of any response body; INTERNAL if the body is unset.
Status status_of(const Response& res) noexcept;

/// Returns the detail of any response body; empty if the body is unset.
const std::string& detail_of(const Response& res) noexcept;

// -- handshake --------------------------------------------------------------

/// Builds the Hello an agent sends first; `version` is normally
/// `protocol_version`.
Message make_hello(uint32_t version, uint32_t max_message_len,
                   uint32_t recv_depth, bool cumulative_acks = false,
                   uint32_t extensions = 0);

/// Builds the Goodbye a closing agent sends last (`reason` for the peer's
/// log; a peer may send any string, so it is bounded by the frame).
Message make_goodbye(std::string reason);

/// Builds a keepalive Ping request.
Message make_ping(uint64_t request_id);

/// Builds the answer to a Ping.
Message make_pong(uint64_t request_id);

/// Builds one OK SendDataResponse that acknowledges every id of `ids`
/// (not empty): the first as its request_id, the others in also_acked.
Message make_send_data_acks(const std::vector<uint64_t>& ids);

/// The same into `out` (an empty Message, e.g. a `frame_scratch`'s).
void fill_send_data_acks(const std::vector<uint64_t>& ids, Message& out);

// -- names and error codes --------------------------------------------------

/// Returns a short name of the message kind for logs, e.g. "request.alloc_mr"
/// or "hello"; "unknown" for unset bodies.
const char* kind_name(const Message& msg) noexcept;

/// Returns the enumerator's name, e.g. "UNKNOWN_TOKEN"; "UNKNOWN_STATUS" for
/// a value this version does not know.
const char* to_string(Status x) noexcept;

/// Maps a wire status to the project error code a local user sees.
///
/// OK -> none; UNKNOWN_TOKEN, ALREADY_SENT, INVALID_LAYOUT, SIZE_LIMIT,
/// OUT_OF_MEMORY, QUOTA_EXCEEDED, LENGTH_MISMATCH -> the errc of the same
/// name; MALFORMED -> malformed_message; INTERNAL -> internal_error;
/// NOT_OWNED (errc has no counterpart) and values unknown to this version
/// -> peer_error.
errc to_errc(Status x) noexcept;

/// Maps a project error code to the wire status an agent answers with.
///
/// none -> OK; the seven codes named in `to_errc` -> their status;
/// truncated_frame, frame_too_large, malformed_message,
/// unknown_message_kind, payload_mismatch -> MALFORMED; everything else
/// (internal_error included) -> INTERNAL. Thus `to_status(to_errc(s)) == s`
/// for every known status except NOT_OWNED.
Status to_status(errc x) noexcept;

} // namespace rdmactor::protocol
