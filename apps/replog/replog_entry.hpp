#pragma once

// The layout of rdmactor-replog's log in memory: the leader's log and each
// follower's copy are arrays of fixed-size entries, entry i (1-based) at
// byte (i - 1) * entry_bytes, so that a range of entries is one contiguous
// range of bytes: the leader copies it into a follower's memory with one
// RDMA WRITE.  The follower checks every entry it is told about (index,
// length, checksum) before it counts it: bytes from the wire are untrusted.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace replog {

/// Bytes of one entry: header and value.
constexpr uint64_t entry_bytes = 256;

/// Bytes of an entry's header: index (8), value length (4), checksum (4).
constexpr uint64_t entry_header_bytes = 16;

/// The longest value an entry holds.
constexpr uint64_t value_max_bytes = entry_bytes - entry_header_bytes;

static_assert(entry_bytes % 8 == 0, "entries stay 8-byte aligned");
static_assert(value_max_bytes >= 128, "room for a useful value");

/// FNV-1a over `n` bytes, continuing from `h`.
inline uint64_t fnv1a(const void* p, size_t n,
                      uint64_t h = 0xcbf29ce484222325ULL) {
  auto b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

/// The checksum of an entry: its index, length and value.
inline uint32_t entry_checksum(uint64_t index, std::string_view value) {
  auto len = static_cast<uint32_t>(value.size());
  auto h = fnv1a(&index, sizeof(index));
  h = fnv1a(&len, sizeof(len), h);
  h = fnv1a(value.data(), value.size(), h);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

/// Writes entry `index` holding `value` (at most value_max_bytes) at `p`.
inline void write_entry(uint8_t* p, uint64_t index, std::string_view value) {
  auto len = static_cast<uint32_t>(value.size());
  auto sum = entry_checksum(index, value);
  std::memcpy(p, &index, 8);
  std::memcpy(p + 8, &len, 4);
  std::memcpy(p + 12, &sum, 4);
  std::memcpy(p + entry_header_bytes, value.data(), value.size());
  std::memset(p + entry_header_bytes + value.size(), 0,
              value_max_bytes - value.size());
}

/// Returns the value of the entry at `p` when it is entry `index` and its
/// checksum holds; false otherwise (never reads past the entry).
inline bool read_entry(const uint8_t* p, uint64_t index, std::string& value) {
  uint64_t got = 0;
  uint32_t len = 0;
  uint32_t sum = 0;
  std::memcpy(&got, p, 8);
  std::memcpy(&len, p + 8, 4);
  std::memcpy(&sum, p + 12, 4);
  if (got != index || len > value_max_bytes)
    return false;
  std::string_view v{reinterpret_cast<const char*>(p + entry_header_bytes),
                     len};
  if (entry_checksum(index, v) != sum)
    return false;
  value.assign(v);
  return true;
}

/// The digest of entries 1..n of a log at `base` (the leader's and every
/// follower's agree when they hold the same entries): FNV-1a over each
/// entry's whole 256 bytes.
inline uint64_t digest(const uint8_t* base, uint64_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint64_t i = 0; i < n; ++i)
    h = fnv1a(base + i * entry_bytes, entry_bytes, h);
  return h;
}

/// A digest as 16 hex digits (what --status and the followers print).
inline std::string hex(uint64_t digest) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(digest));
  return buf;
}

} // namespace replog
