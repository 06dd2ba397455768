#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <caf/expected.hpp>

#include "rdmactor/errc.hpp"
#include "rdmactor/transport/fabric.hpp"

/// The connection handshake of the verbs fabric, carried in rdma_cm private
/// data (internal; exposed for unit tests).
///
/// Every message is 16 bytes in network byte order:
///
///     offset  size  field
///     0       4     magic "RDAC" (0x52444143)
///     4       2     protocol version (1)
///     6       1     kind: 1 offer (connect), 2 answer (accept), 3 reject
///     7       1     reserved, 0
///     8       4     max_message_len_bytes  (reject: the rdmactor errc)
///     12      4     recv_depth             (reject: 0)
///
/// The private data of an RC connect holds at most 56 bytes, so the message
/// fits; transports pad private data with zeros (InfiniBand CM always hands
/// the receiver the full 56 or 196 bytes), so longer input is accepted and
/// the bytes after the message are ignored.  Everything in it comes from
/// the peer and is validated before use.
namespace rdmactor::transport::verbs {

/// Size of every handshake message in bytes.
constexpr size_t hello_size = 16;

/// Magic number at offset 0 ("RDAC").
constexpr uint32_t hello_magic = 0x52444143;

/// Protocol version this build speaks.
constexpr uint16_t hello_version = 1;

/// Smallest max_message_len_bytes a peer may offer.
constexpr uint32_t min_message_len_bytes = 64;

/// Kind of a handshake message.
enum class hello_kind : uint8_t {
  offer = 1,  ///< sent with rdma_connect
  answer = 2, ///< sent with rdma_accept
  reject = 3, ///< sent with rdma_reject
};

/// A decoded handshake message.
struct hello {
  hello_kind kind = hello_kind::offer;
  uint16_t version = hello_version;
  /// Offer or answer: the sender's connection parameters.
  conn_params params;
  /// Reject: why the sender refused (an rdmactor errc value).
  errc reason = errc::none;
};

/// The encoded form of a handshake message.
using hello_bytes = std::array<uint8_t, hello_size>;

/// Encodes an offer or answer carrying `params`.
hello_bytes encode_hello(hello_kind kind, const conn_params& params) noexcept;

/// Encodes a reject carrying `reason`.
hello_bytes encode_reject(errc reason) noexcept;

/// Decodes and validates `len` bytes of untrusted private data.
///
/// Fails with `handshake_failed` for short data, a wrong magic, an
/// unexpected kind or out-of-range parameters (max_message_len_bytes below
/// `min_message_len_bytes`, recv_depth below `min_recv_depth`), and with
/// `version_mismatch` when the peer speaks another protocol version. `expected`
/// is the kind the caller waits for; a reject is always accepted and returned
/// as such.
caf::expected<hello> decode_hello(const void* data, size_t len,
                                  hello_kind expected);

/// Returns the negotiated parameters: the minimum of both sides per field.
conn_params negotiate(const conn_params& ours, const conn_params& theirs);

} // namespace rdmactor::transport::verbs
