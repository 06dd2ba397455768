#pragma once

#include "protocol/agent.pb.h"
#include "rdmactor/errc.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>

namespace rdmactor::protocol {

/// The agent protocol version this build speaks (sent in `Hello.version`).
constexpr uint32_t protocol_version = 1;

/// Size of the frame header: the encoded Message length, 4 bytes, little
/// endian.
constexpr size_t frame_header_len = 4;

/// Largest encoding of a varint-coded 64-bit value.
constexpr size_t max_varint64_len = 10;

/// Upper bound of header + encoded Message for any SendData frame, so that
/// `max_message_len - max_frame_overhead` payload bytes always fit.
///
/// Message{request(1): Request{request_id(1): u64, send_data(5):
/// SendData{len(1): u64}}}: each tag takes 1 byte, each nested length 1 byte
/// (the nested messages stay below 128 bytes).
constexpr size_t max_frame_overhead
    = frame_header_len + 2    // Message.request: tag + length
      + 1 + max_varint64_len  // Request.request_id
      + 2                     // Request.send_data: tag + length
      + 1 + max_varint64_len; // SendData.len

/// What a SendData that carries an immediate value adds to
/// `max_frame_overhead`: SendData.imm (tag + varint32) and has_imm.
constexpr size_t imm_frame_overhead = 1 + 5 + 2;

/// What `n` acknowledgements riding on a SendData (SendData.acked, packed)
/// add to its frame: the field's tag and length (2 bytes while the list
/// stays below 16 KiB), 8 bytes per id, and one more byte for each of the
/// two enclosing lengths (Message.request, Request.send_data) once they
/// pass 127 bytes.
constexpr size_t piggyback_ack_overhead(size_t n) {
  return 1 + 2 + 8 * n + 2;
}

/// Upper bound of header + encoded Message for any ActorMessage frame:
/// Message.actor_message (tag + length), five varint fields (tag + value)
/// and `down` (tag + 1 byte).
constexpr size_t actor_frame_overhead
    = frame_header_len + 2 + 5 * (1 + max_varint64_len) + 2;

/// Outcome of `encode`.
struct encode_result {
  /// `errc::none` on success.
  errc code = errc::none;
  /// Bytes written: frame header + encoded Message; payload goes behind.
  size_t header_len = 0;
  /// Payload bytes that fit behind the header: min(buf_len,
  /// max_message_len) - header_len.
  size_t payload_capacity = 0;
};

/// Bit of the frame header that says "another frame follows this one in
/// the same message" (packed frames, EXT_PACKED_FRAMES).  Message lengths
/// stay far below it (`max_message_len` <= 1 GiB), so a peer that did not
/// offer packing rejects such a header as `frame_too_large`.
constexpr uint32_t more_frames_bit = 0x80000000u;

/// Sets `more_frames_bit` in the frame header at `frame` (at least
/// `frame_header_len` bytes, written by `encode` or `encode_send_data`):
/// what a sender that packs frames into one message does to every frame
/// but the last.
void mark_more_frames(uint8_t* frame) noexcept;

/// Outcome of `decode`: the payload is a view into the decoded buffer.
struct decode_result {
  /// `errc::none` on success.
  errc code = errc::none;
  /// First payload byte inside the input buffer; null on error.
  const uint8_t* payload = nullptr;
  /// Payload bytes; equals `SendData.len` for SendData, 0 otherwise.
  size_t payload_len = 0;
  /// Bytes of the input this frame takes (header, Message, payload): the
  /// next packed frame starts there.  Equals the input length unless
  /// `more` is set.
  size_t frame_len = 0;
  /// The header's `more_frames_bit` was set: another frame follows.
  bool more = false;
};

/// Writes the frame header and `msg` to `buf`; the caller places the payload
/// (SendData only, exactly `SendData.len` bytes) at `buf + header_len`.
///
/// Fails with `errc::frame_too_large` if header + Message alone exceed
/// `max_message_len`, and with `errc::buffer_too_small` if they do not fit
/// `buf_len`. Never writes beyond `buf + buf_len`; on error nothing is
/// written.
encode_result encode(const Message& msg, uint8_t* buf, size_t buf_len,
                     size_t max_message_len);

/// The fields of an eager SendData frame (one without a rendezvous
/// `source`): Message{request: Request{request_id, send_data:
/// SendData{len, imm, has_imm, acked}}}.
struct send_data_fields {
  uint64_t request_id = 0;
  uint64_t len = 0;
  /// Sets SendData.imm and has_imm.
  std::optional<uint32_t> imm;
  /// SendData.acked: `acked_count` ids at `acked`.
  const uint64_t* acked = nullptr;
  size_t acked_count = 0;
};

/// Largest frame header + encoded Message of an eager SendData with `acked`
/// acknowledgements: the bound `encode_send_data` needs from `buf_len`.
constexpr size_t max_send_data_header_len(size_t acked) {
  return frame_header_len
         + 3 * (1 + max_varint64_len) // Message.request and Request.send_data
                                      // (tag + length), Request.request_id
         + 1 + max_varint64_len       // SendData.len
         + imm_frame_overhead         // SendData.imm and has_imm
         + 1 + max_varint64_len + 8 * acked; // SendData.acked, packed
}

/// Writes the frame header and the Message of an eager SendData to `buf`,
/// byte for byte what `encode` writes for the same Message (fields in
/// number order, zero scalars and an empty `acked` left out, `acked`
/// packed), without building one: the data path's frame, about a tenth of
/// the instructions of a Message built, sized, serialized and freed.
/// Returns the bytes written (frame header + Message); 0 when they would
/// exceed `buf_len` or `max_message_len` (nothing is written then).
size_t encode_send_data(const send_data_fields& f, uint8_t* buf, size_t buf_len,
                        size_t max_message_len) noexcept;

/// The fields of an eager ActorMessage frame (one without a rendezvous
/// `source`): Message{actor_message: ActorMessage{target, sender,
/// message_id, len, total_len, down}}.
struct actor_message_fields {
  uint64_t target = 0;
  uint64_t sender = 0;
  uint64_t message_id = 0;
  uint64_t len = 0;
  uint64_t total_len = 0;
  bool down = false;
};

/// Writes the frame header and the Message of an eager ActorMessage to
/// `buf`, byte for byte what `encode` writes for the same Message (fields
/// in number order, zero values left out), without building one.  At most
/// `actor_frame_overhead` bytes.  Returns the bytes written; 0 when they
/// would exceed `buf_len` or `max_message_len` (nothing is written then).
size_t encode_actor_message(const actor_message_fields& f, uint8_t* buf,
                            size_t buf_len, size_t max_message_len) noexcept;

/// Bodies an eager parse may take instead of allocating them on the output
/// Message's arena (`frame_scratch` releases them from the frame before):
/// each null, or on that arena and held by no message.  A parse clears
/// what it takes and nulls its member.
struct eager_spares {
  ActorMessage* actor_message = nullptr;
  Request* request = nullptr;
  SendData* send_data = nullptr;
};

/// Parses the `len` bytes of an encoded Message at `data` into `out` when
/// they are exactly what `encode` writes for an eager ActorMessage (one
/// field, Message.actor_message, whose fields 1 to 6 come in number order,
/// each at most once, with minimal varints and `down` as 1); returns false
/// and leaves `out` untouched otherwise.  `decode` tries it first: the
/// remote-actor frame at a fraction of protobuf's parse, and any other
/// encoding still goes to protobuf, which gives the same Message for these
/// bytes.  `spares` (may be null): the ActorMessage to take, when on
/// `out`'s arena.
bool parse_eager_actor_message(const uint8_t* data, size_t len, Message& out,
                               eager_spares* spares = nullptr) noexcept;

/// Parses the `len` bytes of an encoded Message at `data` into `out` when
/// they are exactly what `encode_send_data` writes for an eager SendData
/// (Message.request holding Request.request_id, if not zero, then
/// Request.send_data; its varint fields 1 to 3 in number order, each at
/// most once, minimal, nonzero, imm within 32 bits and has_imm as 1; then
/// `acked` packed, if not empty, last); returns false and leaves `out`
/// untouched otherwise (any other encoding is protobuf's to parse, to the
/// same Message).  `spares` (may be null): the Request and SendData to
/// take, when on `out`'s arena.
bool parse_eager_send_data(const uint8_t* data, size_t len, Message& out,
                           eager_spares* spares = nullptr) noexcept;

/// Parses the frame of `len` bytes at `data` into `out`, checking every
/// length against what arrived and against `max_message_len` first.
///
/// Errors, checked in this order:
/// - `errc::truncated_frame`: fewer than `frame_header_len` bytes;
/// - `errc::frame_too_large`: `len`, or header + announced Message length,
///   exceeds `max_message_len`;
/// - `errc::truncated_frame`: the announced Message length exceeds what
///   arrived;
/// - `errc::malformed_message`: the bytes do not parse;
/// - `errc::unknown_message_kind`: the Message, Request or Response body is
///   unset (a case unknown to this version arrives as unset), or a SendMR
///   kind is unknown;
/// - `errc::payload_mismatch`: a SendData or ActorMessage whose `len`
///   differs from the payload bytes that arrived, or payload behind any
///   other message.
///
/// With `allow_more` (the receiver offered EXT_PACKED_FRAMES), a header
/// with `more_frames_bit` announces a frame that ends where its announced
/// payload ends (SendData.len, ActorMessage.len; none for the others)
/// with at least one more byte behind it: `more` and `frame_len` say where
/// the next frame starts.  Such a frame whose payload would reach the end
/// of the input is `payload_mismatch`; without `allow_more` the bit makes
/// the header `frame_too_large`.
///
/// After `unknown_message_kind` and `payload_mismatch`, `out` holds the
/// parsed Message (the caller may answer its request_id); after the other
/// errors its content is unspecified. No payload byte is copied.
/// The eager ActorMessage and SendData forms are parsed by hand
/// (`parse_eager_actor_message`, `parse_eager_send_data`), taking bodies
/// from `spares` (may be null).
decode_result decode(const uint8_t* data, size_t len, size_t max_message_len,
                     Message& out, bool allow_more = false,
                     eager_spares* spares = nullptr);

} // namespace rdmactor::protocol
