#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "rdmactor/transport/fabric.hpp"

/// The soft fabric's wire format: the hello each side sends once after the
/// TCP connection is up, then a stream of frames (a fixed header, then the
/// payload the header announces).  Every integer is little-endian.
///
/// Hello (24 bytes): magic "RDMACTSF", u32 version, u32
/// max_message_len_bytes, u32 recv_depth, u32 rnr_timeout_ms.
///
/// Frame header (32 bytes): u8 type, u8 flags (bit 0: immediate data
/// present), u8 status (NAK only: a `wc_status`), u8 acks, u32 seq (per
/// direction, from 0), u32 length, u32 imm, u32 rkey, u32 check (FNV-1a of
/// the other 28 bytes), u64 remote address.
///
/// Acknowledgements coalesce, as a NIC's do.  An `ack` frame acknowledges
/// the `length` oldest requests the receiver of the ACK has outstanding
/// (1 or more, never a READ).  Every other frame may carry `acks` ACKs
/// ahead of itself: they count as an `ack` frame of that length that
/// arrived just before it.  A responder defers the ACK of a SEND (up to
/// `limits::ack_delay_us`, or `limits::max_owed_acks` of them) so that the
/// next frame it sends anyway carries it; every other response goes at
/// once, after the ACKs owed before it.
///
/// Atomics (version 3): a `fetch_add` or `compare_swap` request names the
/// 8-byte word at addr / rkey (length 8) and carries 16 bytes of operands
/// after its header: u64 compare_add, u64 swap.  The answer is an
/// `atomic_response` (length 8) carrying the word's old value in 8 bytes
/// after its header, or a NAK; never an ACK.
namespace rdmactor::transport::soft::wire {

/// Protocol version; a peer with another version is refused.  3: atomics.
constexpr uint32_t version = 3;

/// First bytes of every hello.
constexpr std::array<uint8_t, 8> magic
    = {'R', 'D', 'M', 'A', 'C', 'T', 'S', 'F'};

/// Size of a hello on the wire.
constexpr size_t hello_size = 24;

/// What each side announces once after connecting: its protocol version,
/// its connection-parameter offer and its RNR timeout (which bounds how
/// long the peer may see no answer from it while it waits for a receive).
struct hello {
  uint32_t version = wire::version;
  uint32_t max_message_len_bytes = 0;
  uint32_t recv_depth = 0;
  uint32_t rnr_timeout_ms = 0;
};

/// Why a listener refused a handshake.  A refusal is a hello with both
/// offers 0 and the reason in `rnr_timeout_ms`, sent just before the
/// listener closes the connection, so that the client can tell "dropped"
/// from "not an rdmactor endpoint".
enum class refusal : uint32_t {
  busy = 1,      ///< too many handshakes in progress (from this address)
  timed_out = 2, ///< the client's hello did not come within the deadline
};

/// Returns the hello that carries `why`.
hello refusal_hello(refusal why) noexcept;

/// Outcome of decoding a hello.
enum class hello_status {
  ok,
  bad_magic,   ///< not an rdmactor soft-fabric peer
  bad_version, ///< an rdmactor peer speaking another version
  bad_params,  ///< an offer outside the supported ranges (a receive depth
               ///< below `min_recv_depth`, which the data path needs)
  refused,     ///< a refusal (`refusal_hello`): the reason is in out
};

/// Writes `x` to `out[0..hello_size)`.
void encode(const hello& x, uint8_t* out) noexcept;

/// Reads a hello from `in[0..hello_size)` into `out`.  `out.version` is
/// set even for `bad_version`.
hello_status decode(const uint8_t* in, hello& out) noexcept;

/// Kinds of frames.  Requests flow from the initiator to the responder;
/// every request is answered, in order, by exactly one response.
enum class frame_type : uint8_t {
  send = 1,            ///< request: payload for the oldest posted receive
  write = 2,           ///< request: payload for [addr, addr + length) / rkey
  read = 3,            ///< request: `length` bytes from addr / rkey
  ack = 4,             ///< response: the request was executed
  nak = 5,             ///< response: the request failed with `status`
  read_response = 6,   ///< response: the `length` bytes a READ asked for
  fetch_add = 7,       ///< request: add operand 0 to the word at addr / rkey
  compare_swap = 8,    ///< request: swap in operand 1 if the word equals 0
  atomic_response = 9, ///< response: the old value of an atomic's word
};

/// Bytes of operands after an atomic request's header.
constexpr uint32_t atomic_operand_bytes = 16;

/// Bytes after an `atomic_response` header: the word's old value.
constexpr uint32_t atomic_result_bytes = 8;

/// Returns true for fetch_add and compare_swap.
constexpr bool is_atomic(frame_type t) noexcept {
  return t == frame_type::fetch_add || t == frame_type::compare_swap;
}

/// Size of a frame header on the wire.
constexpr size_t header_size = 32;

/// A decoded frame header.
struct header {
  frame_type type = frame_type::ack;
  bool has_imm = false;
  /// NAK only: remote_access_error, remote_operation_error or
  /// rnr_retry_exceeded.
  wc_status status = wc_status::success;
  /// ACKs carried ahead of this frame (any type but `ack`).
  uint8_t acks = 0;
  uint32_t seq = 0;
  /// Payload bytes (send, write, read_response), bytes requested (read) or
  /// requests acknowledged (ack, at least 1).
  uint32_t length = 0;
  uint32_t imm = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
};

/// Writes `x` with its check word to `out[0..header_size)`.
void encode(const header& x, uint8_t* out) noexcept;

/// Reads a header from `in[0..header_size)`; returns false when the bytes
/// are not a well-formed header (bad check word, unknown type, fields that
/// the type does not allow).
bool decode(const uint8_t* in, header& out) noexcept;

/// Damages an encoded header so that `decode` rejects it (fault injection).
void corrupt(uint8_t* encoded) noexcept;

/// Returns the payload bytes that follow a header on the wire.
constexpr uint32_t payload_bytes(const header& h) noexcept {
  if (is_atomic(h.type))
    return atomic_operand_bytes;
  if (h.type == frame_type::atomic_response)
    return atomic_result_bytes;
  return h.type == frame_type::send || h.type == frame_type::write
                 || h.type == frame_type::read_response
             ? h.length
             : 0;
}

/// Returns true for send, write, read, fetch_add and compare_swap.
constexpr bool is_request(frame_type t) noexcept {
  return t == frame_type::send || t == frame_type::write
         || t == frame_type::read || is_atomic(t);
}

/// Puts `x` little-endian into `out[0..8)`.
void put_u64(uint8_t* out, uint64_t x) noexcept;

/// Reads a little-endian u64 from `in[0..8)`.
uint64_t get_u64(const uint8_t* in) noexcept;

} // namespace rdmactor::transport::soft::wire
