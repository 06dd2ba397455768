#include "transport/verbs/handshake.hpp"

#include <algorithm>
#include <string>

#include "rdmactor/error.hpp"
#include "rdmactor/transport/link_params.hpp"

namespace rdmactor::transport::verbs {

namespace {

void put16(uint8_t* p, uint16_t x) noexcept {
  p[0] = static_cast<uint8_t>(x >> 8);
  p[1] = static_cast<uint8_t>(x);
}

void put32(uint8_t* p, uint32_t x) noexcept {
  p[0] = static_cast<uint8_t>(x >> 24);
  p[1] = static_cast<uint8_t>(x >> 16);
  p[2] = static_cast<uint8_t>(x >> 8);
  p[3] = static_cast<uint8_t>(x);
}

uint16_t get16(const uint8_t* p) noexcept {
  return static_cast<uint16_t>((p[0] << 8) | p[1]);
}

uint32_t get32(const uint8_t* p) noexcept {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8)
         | uint32_t{p[3]};
}

hello_bytes encode(hello_kind kind, uint32_t a, uint32_t b) noexcept {
  hello_bytes out{};
  put32(out.data(), hello_magic);
  put16(out.data() + 4, hello_version);
  out[6] = static_cast<uint8_t>(kind);
  out[7] = 0;
  put32(out.data() + 8, a);
  put32(out.data() + 12, b);
  return out;
}

const char* kind_name(hello_kind x) noexcept {
  switch (x) {
    case hello_kind::offer:
      return "offer";
    case hello_kind::answer:
      return "answer";
    case hello_kind::reject:
      return "reject";
  }
  return "unknown";
}

} // namespace

hello_bytes encode_hello(hello_kind kind, const conn_params& params) noexcept {
  return encode(kind, params.max_message_len_bytes, params.recv_depth);
}

hello_bytes encode_reject(errc reason) noexcept {
  return encode(hello_kind::reject, static_cast<uint32_t>(reason), 0);
}

caf::expected<hello> decode_hello(const void* data, size_t len,
                                  hello_kind expected) {
  if (data == nullptr || len < hello_size)
    return make_error(errc::handshake_failed,
                      "peer sent " + std::to_string(data ? len : 0)
                          + " bytes of connection private data, need "
                          + std::to_string(hello_size)
                          + ": the peer is not an rdmactor peer");
  auto p = static_cast<const uint8_t*>(data);
  if (get32(p) != hello_magic)
    return make_error(errc::handshake_failed,
                      "peer's connection private data has no rdmactor magic: "
                      "the peer is not an rdmactor peer");
  hello result;
  result.version = get16(p + 4);
  if (result.version != hello_version)
    return make_error(errc::version_mismatch,
                      "peer speaks rdmactor protocol version "
                          + std::to_string(result.version) + ", this build "
                          + std::to_string(hello_version)
                          + "; run the same rdmactor version on both hosts");
  auto kind = p[6];
  if (kind == static_cast<uint8_t>(hello_kind::reject)) {
    result.kind = hello_kind::reject;
    auto code = get32(p + 8);
    // Only codes that name a handshake outcome are believed.
    switch (static_cast<errc>(code)) {
      case errc::handshake_failed:
      case errc::version_mismatch:
      case errc::device_not_found:
      case errc::invalid_argument:
      case errc::connect_failed:
      case errc::out_of_memory:
      case errc::closed:
        result.reason = static_cast<errc>(code);
        break;
      default:
        result.reason = errc::connect_failed;
    }
    return result;
  }
  if (kind != static_cast<uint8_t>(expected) || p[7] != 0)
    return make_error(errc::handshake_failed,
                      std::string{"peer sent a malformed handshake (kind "}
                          + std::to_string(kind) + ", expected "
                          + kind_name(expected) + ")");
  result.kind = expected;
  result.params.max_message_len_bytes = get32(p + 8);
  result.params.recv_depth = get32(p + 12);
  if (result.params.max_message_len_bytes < min_message_len_bytes)
    return make_error(errc::handshake_failed,
                      "peer offered max_message_len_bytes "
                          + std::to_string(result.params.max_message_len_bytes)
                          + ", below the minimum "
                          + std::to_string(min_message_len_bytes));
  if (result.params.recv_depth < min_recv_depth)
    return make_error(errc::handshake_failed,
                      "peer offered recv_depth "
                          + std::to_string(result.params.recv_depth)
                          + ", below the " + std::to_string(min_recv_depth)
                          + " the credit protocol needs; set recv-depth >= "
                          + std::to_string(min_recv_depth) + " there");
  return result;
}

conn_params negotiate(const conn_params& ours, const conn_params& theirs) {
  conn_params result;
  result.max_message_len_bytes
      = std::min(ours.max_message_len_bytes, theirs.max_message_len_bytes);
  result.recv_depth = std::min(ours.recv_depth, theirs.recv_depth);
  return result;
}

} // namespace rdmactor::transport::verbs
