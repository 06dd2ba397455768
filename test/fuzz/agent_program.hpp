#pragma once

// The input format of rdmactor_fuzz_agent: a program of operations that a
// peer (and the local user) perform against one agent.  Each operation is
// one byte (taken modulo `op::count`) followed by its operands; a program
// that runs out of bytes reads zeros.  The seed writer and the fuzz target
// share this header so that seeds stay meaningful when the format grows.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace rdmactor::fuzz {

/// One operation of a program.
enum class op : uint8_t {
  /// u16 length, that many bytes, u8 credits: the peer SENDs raw bytes.
  raw_frame,
  /// size pick, align pick: the peer sends AllocMR.
  alloc_mr,
  /// token pick: the peer sends ReleaseMR.
  release_mr,
  /// u8 kind (0 LOCAL, 1 REMOTE, else that raw value), token pick.
  send_mr,
  /// u16 length, u8 payload skew (0: exact; else the payload is that much
  /// shorter or longer): the peer sends SendData.
  send_data,
  /// u8 which request of the agent, u8 body, u8 status, token pick: the
  /// peer answers a request the agent sent (or an unknown one).
  respond,
  /// u8 operation, u16 operand: the local user calls the agent (see
  /// `user_op`).
  user,
  /// u8 count (0: until none is left): fire pending timers.
  timeouts,
  /// u32 version: the peer sends Hello.
  hello,
  /// u8 credits: the peer sends a credit-only message.
  credits,
  /// The peer disconnects (the queue pair enters the error state).
  disconnect,
  /// u8 flags (bit 0: first a Hello offering remote actors and actor flow
  /// control, window u8 messages u16 bytes), u32 messages, u32 bytes: the
  /// peer sends ActorAck (a hostile one acks more than was sent).
  actor_ack,
  /// u8 flags (bit 0: first a Hello offering cumulative and piggybacked
  /// acknowledgements), u8 count (modulo 20: may pass the limit of 16),
  /// then per id u8 which (as in `respond`: one of the agent's requests,
  /// 0xff: u64 id follows), then u16 length: the peer sends SendData of
  /// that length carrying those acknowledgements (SendData.acked).
  acked_send_data,
  count,
};

/// What the local user does in an `op::user` operation.
enum class user_op : uint8_t {
  request_remote_mr, ///< operand: size (align 64)
  send_local_mr,     ///< operand: size of a fresh local region
  send_remote_mr,    ///< operand: index of a held remote region
  send_data,         ///< operand: size of a fresh local region
  receive_data,
  receive_local_mr,
  receive_remote_mr,
  release,     ///< operand: index of a held remote region
  drop_handle, ///< operand: index of a held handle
  stats,
  count,
};

/// How a token is picked: `token_known` + index selects one the agent
/// handed out (or, without any, falls back to explicit fields); `mutated`
/// changes one field of a known token by a u8 delta; `explicit_fields`
/// reads u64 addr, u64 len, u32 rkey.
enum class token_pick : uint8_t { known, mutated, explicit_fields, count };

/// Reads a program; past the end every read yields zero.
class program_reader {
public:
  program_reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}

  bool done() const noexcept {
    return n_ == 0;
  }

  uint8_t u8() noexcept {
    if (n_ == 0)
      return 0;
    --n_;
    return *p_++;
  }

  uint16_t u16() noexcept {
    return static_cast<uint16_t>(u8() | (u8() << 8));
  }

  uint32_t u32() noexcept {
    return static_cast<uint32_t>(u16()) | (static_cast<uint32_t>(u16()) << 16);
  }

  uint64_t u64() noexcept {
    return static_cast<uint64_t>(u32()) | (static_cast<uint64_t>(u32()) << 32);
  }

  /// Takes up to `len` bytes (fewer when the program ends).
  std::vector<uint8_t> bytes(size_t len) {
    auto k = len < n_ ? len : n_;
    std::vector<uint8_t> out(p_, p_ + k);
    p_ += k;
    n_ -= k;
    return out;
  }

private:
  const uint8_t* p_;
  size_t n_;
};

/// Writes a program (for seeds).
class program_writer {
public:
  program_writer& u8(uint8_t x) {
    buf.push_back(x);
    return *this;
  }

  program_writer& u16(uint16_t x) {
    return u8(static_cast<uint8_t>(x)).u8(static_cast<uint8_t>(x >> 8));
  }

  program_writer& u32(uint32_t x) {
    return u16(static_cast<uint16_t>(x)).u16(static_cast<uint16_t>(x >> 16));
  }

  program_writer& u64(uint64_t x) {
    return u32(static_cast<uint32_t>(x)).u32(static_cast<uint32_t>(x >> 32));
  }

  program_writer& operation(op x) {
    return u8(static_cast<uint8_t>(x));
  }

  program_writer& bytes(const std::vector<uint8_t>& x) {
    buf.insert(buf.end(), x.begin(), x.end());
    return *this;
  }

  std::vector<uint8_t> buf;
};

} // namespace rdmactor::fuzz
