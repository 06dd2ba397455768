#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>

namespace rdmactor::demo {

/// How long either side of the demo waits for one operation.
constexpr auto op_timeout = std::chrono::seconds(30);

/// FNV-1a over `len` bytes: the checksum both sides of the demo compare.
inline uint64_t fnv1a(const uint8_t* data, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; ++i) {
    h ^= data[i];
    h *= 1099511628211ull;
  }
  return h;
}

/// What the server answers for every chunk or memory region it saw:
/// 16 bytes, length then checksum (host byte order; the demo runs both
/// sides on the same architecture).
struct digest {
  uint64_t len = 0;
  uint64_t sum = 0;

  static constexpr size_t wire_size = 16;

  /// The answer to a lent region the server would not allocate memory to
  /// read (over its rdmactor.peer-max-claim-bytes): length and checksum 0,
  /// which no real digest has (the checksum of 0 bytes is the FNV basis).
  static constexpr digest refused() {
    return digest{0, 0};
  }

  bool is_refusal() const {
    return len == 0 && sum == 0;
  }

  void write_to(uint8_t* out) const {
    std::memcpy(out, &len, 8);
    std::memcpy(out + 8, &sum, 8);
  }

  static digest read_from(const uint8_t* in) {
    digest d;
    std::memcpy(&d.len, in, 8);
    std::memcpy(&d.sum, in + 8, 8);
    return d;
  }
};

/// Fills `data` with a pattern that depends on `seed` and the position.
inline void fill_pattern(uint8_t* data, size_t len, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < len; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    data[i] = static_cast<uint8_t>(x);
  }
}

/// Size and seed of the memory region the server lends to every client.
constexpr size_t lent_mr_bytes = 64 * 1024;
constexpr uint32_t lent_mr_seed = 0x5eed;

} // namespace rdmactor::demo
