#pragma once

// Self-describing payloads: every buffer the soak tool moves starts with a
// 16-byte header (magic, length, seed) followed by bytes derived from the
// seed and their offset, so a receiver checks content without being told
// what to expect, whole or chunk by chunk.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace rdmactor::soak {

/// How long either side of the soak waits for one operation.
constexpr auto op_timeout = std::chrono::seconds(60);

/// "SOAK", little endian.
constexpr uint32_t payload_magic = 0x4b414f53;

/// Header: u32 magic, u32 length (including the header), u64 seed.
constexpr size_t payload_header_bytes = 16;

/// The byte at `offset` of a payload with `seed` (offset >= header).
inline uint8_t payload_byte(uint64_t seed, uint64_t offset) {
  uint64_t x = seed ^ (offset * 0x9e3779b97f4a7c15ull);
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  return static_cast<uint8_t>(x >> 56);
}

/// Writes a payload of `len` bytes (at least the header) with `seed`.
inline void write_payload(uint8_t* p, uint32_t len, uint64_t seed) {
  std::memcpy(p, &payload_magic, 4);
  std::memcpy(p + 4, &len, 4);
  std::memcpy(p + 8, &seed, 8);
  for (uint64_t i = payload_header_bytes; i < len; ++i)
    p[i] = payload_byte(seed, i);
}

/// Returns true when the `len` bytes at `p` are one whole, intact payload.
inline bool check_payload(const uint8_t* p, uint64_t len) {
  uint32_t magic = 0;
  uint32_t stated = 0;
  uint64_t seed = 0;
  if (len < payload_header_bytes)
    return false;
  std::memcpy(&magic, p, 4);
  std::memcpy(&stated, p + 4, 4);
  std::memcpy(&seed, p + 8, 8);
  if (magic != payload_magic || stated != len)
    return false;
  for (uint64_t i = payload_header_bytes; i < len; ++i)
    if (p[i] != payload_byte(seed, i))
      return false;
  return true;
}

/// Describes what the bytes at `p` hold, for a report on a bad payload:
/// the header fields and whether the rest matches the header's seed.
inline std::string describe_payload(const uint8_t* p, uint64_t len) {
  if (len < payload_header_bytes)
    return "shorter than a header";
  uint32_t magic = 0;
  uint32_t stated = 0;
  uint64_t seed = 0;
  std::memcpy(&magic, p, 4);
  std::memcpy(&stated, p + 4, 4);
  std::memcpy(&seed, p + 8, 8);
  uint64_t first_bad = len;
  for (uint64_t i = payload_header_bytes; i < len && i < stated; ++i)
    if (p[i] != payload_byte(seed, i)) {
      first_bad = i;
      break;
    }
  return std::string{magic == payload_magic ? "header ok" : "bad magic"}
         + ", stated length " + std::to_string(stated) + " of "
         + std::to_string(len) + ", seed " + std::to_string(seed)
         + ", first byte off its own seed at "
         + (first_bad == len ? std::string{"none"} : std::to_string(first_bad));
}

/// Checks payloads that arrive as consecutive chunks (send_data): a chunk
/// either starts a payload (with its header) or continues the current one.
class chunk_checker {
public:
  /// Feeds the next chunk; returns false when it does not fit the stream
  /// (bad header, wrong bytes, or longer than the payload's rest).
  bool feed(const uint8_t* p, size_t n) {
    size_t pos = 0;
    while (pos < n) {
      if (remaining_ == 0) {
        if (n - pos < payload_header_bytes)
          return false;
        uint32_t magic = 0;
        uint32_t len = 0;
        std::memcpy(&magic, p + pos, 4);
        std::memcpy(&len, p + pos + 4, 4);
        std::memcpy(&seed_, p + pos + 8, 8);
        if (magic != payload_magic || len < payload_header_bytes)
          return false;
        offset_ = payload_header_bytes;
        remaining_ = len - payload_header_bytes;
        pos += payload_header_bytes;
        if (remaining_ == 0)
          ++completed;
        continue;
      }
      auto k = n - pos < remaining_ ? n - pos : remaining_;
      for (size_t i = 0; i < k; ++i)
        if (p[pos + i] != payload_byte(seed_, offset_ + i))
          return false;
      offset_ += k;
      remaining_ -= k;
      pos += k;
      if (remaining_ == 0)
        ++completed;
    }
    return true;
  }

  /// Payloads received whole.
  uint64_t completed = 0;

private:
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
  uint64_t remaining_ = 0;
};

} // namespace rdmactor::soak
