#include "transport/soft/wire.hpp"

#include <cstring>

#include "rdmactor/transport/link_params.hpp"
#include "transport/soft/limits.hpp"

namespace rdmactor::transport::soft::wire {

namespace {

void put32(uint8_t* p, uint32_t x) noexcept {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<uint8_t>(x >> (8 * i));
}

void put64(uint8_t* p, uint64_t x) noexcept {
  for (int i = 0; i < 8; ++i)
    p[i] = static_cast<uint8_t>(x >> (8 * i));
}

uint32_t get32(const uint8_t* p) noexcept {
  uint32_t x = 0;
  for (int i = 3; i >= 0; --i)
    x = (x << 8) | p[i];
  return x;
}

uint64_t get64(const uint8_t* p) noexcept {
  uint64_t x = 0;
  for (int i = 7; i >= 0; --i)
    x = (x << 8) | p[i];
  return x;
}

constexpr size_t check_offset = 20;

/// FNV-1a over the header without its check word.
uint32_t check_of(const uint8_t* p) noexcept {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < header_size; ++i) {
    if (i >= check_offset && i < check_offset + 4)
      continue;
    h ^= p[i];
    h *= 16777619u;
  }
  return h;
}

bool valid_nak_status(uint8_t s) noexcept {
  auto st = static_cast<wc_status>(s);
  return st == wc_status::remote_access_error
         || st == wc_status::remote_operation_error
         || st == wc_status::rnr_retry_exceeded;
}

} // namespace

void put_u64(uint8_t* out, uint64_t x) noexcept {
  put64(out, x);
}

uint64_t get_u64(const uint8_t* in) noexcept {
  return get64(in);
}

hello refusal_hello(refusal why) noexcept {
  hello h;
  h.rnr_timeout_ms = static_cast<uint32_t>(why);
  return h;
}

void encode(const hello& x, uint8_t* out) noexcept {
  std::memcpy(out, magic.data(), magic.size());
  put32(out + 8, x.version);
  put32(out + 12, x.max_message_len_bytes);
  put32(out + 16, x.recv_depth);
  put32(out + 20, x.rnr_timeout_ms);
}

hello_status decode(const uint8_t* in, hello& out) noexcept {
  if (std::memcmp(in, magic.data(), magic.size()) != 0)
    return hello_status::bad_magic;
  out.version = get32(in + 8);
  out.max_message_len_bytes = get32(in + 12);
  out.recv_depth = get32(in + 16);
  out.rnr_timeout_ms = get32(in + 20);
  if (out.version != version)
    return hello_status::bad_version;
  if (out.max_message_len_bytes == 0 && out.recv_depth == 0
      && (out.rnr_timeout_ms == static_cast<uint32_t>(refusal::busy)
          || out.rnr_timeout_ms == static_cast<uint32_t>(refusal::timed_out)))
    return hello_status::refused;
  if (out.max_message_len_bytes < limits::min_message_len_bytes
      || out.max_message_len_bytes > limits::max_message_len_bytes
      || out.recv_depth < min_recv_depth
      || out.recv_depth > limits::max_recv_depth)
    return hello_status::bad_params;
  return hello_status::ok;
}

void encode(const header& x, uint8_t* out) noexcept {
  out[0] = static_cast<uint8_t>(x.type);
  out[1] = x.has_imm ? 1 : 0;
  out[2] = x.type == frame_type::nak ? static_cast<uint8_t>(x.status) : 0;
  out[3] = x.acks;
  put32(out + 4, x.seq);
  put32(out + 8, x.length);
  put32(out + 12, x.imm);
  put32(out + 16, x.rkey);
  put64(out + 24, x.addr);
  put32(out + check_offset, check_of(out));
}

bool decode(const uint8_t* in, header& out) noexcept {
  if (get32(in + check_offset) != check_of(in))
    return false;
  auto type = in[0];
  if (type < static_cast<uint8_t>(frame_type::send)
      || type > static_cast<uint8_t>(frame_type::atomic_response))
    return false;
  out.type = static_cast<frame_type>(type);
  auto flags = in[1];
  if (flags > 1)
    return false;
  out.has_imm = flags == 1;
  out.acks = in[3];
  out.seq = get32(in + 4);
  out.length = get32(in + 8);
  out.imm = get32(in + 12);
  out.rkey = get32(in + 16);
  out.addr = get64(in + 24);
  out.status = wc_status::success;
  if (out.type == frame_type::nak) {
    if (!valid_nak_status(in[2]))
      return false;
    out.status = static_cast<wc_status>(in[2]);
  } else if (in[2] != 0) {
    return false;
  }
  // Immediate data only on send and write, and only when flagged.
  bool imm_allowed
      = out.type == frame_type::send || out.type == frame_type::write;
  if ((out.has_imm && !imm_allowed) || (!out.has_imm && out.imm != 0))
    return false;
  switch (out.type) {
    case frame_type::send:
      return out.rkey == 0 && out.addr == 0;
    case frame_type::write:
    case frame_type::read:
      return true;
    case frame_type::ack:
      return out.acks == 0 && out.length > 0 && out.rkey == 0 && out.addr == 0;
    case frame_type::nak:
      return out.length == 0 && out.rkey == 0 && out.addr == 0;
    case frame_type::read_response:
      return out.rkey == 0 && out.addr == 0;
    case frame_type::fetch_add:
    case frame_type::compare_swap:
      return out.length == atomic_result_bytes;
    case frame_type::atomic_response:
      return out.length == atomic_result_bytes && out.rkey == 0
             && out.addr == 0;
  }
  return false;
}

void corrupt(uint8_t* encoded) noexcept {
  for (size_t i = 0; i < 4; ++i)
    encoded[check_offset + i] ^= 0xFF;
}

} // namespace rdmactor::transport::soft::wire
