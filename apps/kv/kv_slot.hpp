#pragma once

// The layout of the key-value table in the server's registered memory, and
// the seqlock that lets clients read it with one-sided RDMA READ while the
// server writes it.  CAF-free and header-only: the server writes slots with
// `write_slot`, clients check what they read with `read_slot` and
// `read_header`.  Numbers are in host byte order (server and clients on the
// same architecture).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace kv {

/// Longest key, in bytes (keys have 1 to `key_max_bytes`).
constexpr size_t key_max_bytes = 32;

/// Longest value, in bytes (values have 0 to `value_max_bytes`).
constexpr size_t value_max_bytes = 192;

/// Bytes of one slot (a multiple of 64: slots never share a cache line).
constexpr size_t slot_bytes = 256;

/// Bytes of the table header in front of the slots.
constexpr size_t header_bytes = 64;

/// Most slots a key may probe from its home slot (linear probing); the
/// server refuses a new key when all of them hold other keys.
constexpr uint32_t default_max_probes = 32;

/// "RDKVTBL1": the header's magic and the tag of the server's send_mr.
constexpr uint64_t table_magic = 0x314c4254564b4452ULL;

/// Version of this layout (the header's `layout`).
constexpr uint32_t layout_version = 1;

/// Offsets inside a slot.  A slot is written as a seqlock: `begin` and
/// `end` hold the slot's version, odd while the server writes it; the
/// checksum covers bytes [0, checksum_at) with `begin` at its final value.
/// A reader accepts a slot only when begin == end, the version is even and
/// the checksum matches (an RDMA READ does not promise to read in address
/// order, hence both words and the checksum).
namespace at {
constexpr size_t begin = 0;                          ///< u64 version
constexpr size_t state = 8;                          ///< u32: 0 empty, 1 used
constexpr size_t key_len = 12;                       ///< u16
constexpr size_t value_len = 14;                     ///< u16
constexpr size_t key = 16;                           ///< key_max_bytes
constexpr size_t value = key + key_max_bytes;        ///< value_max_bytes
constexpr size_t checksum = value + value_max_bytes; ///< u64
constexpr size_t end = checksum + 8;                 ///< u64 version
static_assert(end + 8 == slot_bytes);
static_assert(checksum % 8 == 0);
} // namespace at

/// Offsets inside the header.
namespace hdr {
constexpr size_t magic = 0;       ///< u64 table_magic
constexpr size_t layout = 8;      ///< u32 layout_version
constexpr size_t slot_size = 12;  ///< u32 slot_bytes
constexpr size_t slots = 16;      ///< u64 number of slots
constexpr size_t max_probes = 24; ///< u32
} // namespace hdr

/// FNV-1a, 64 bits, from `seed`.
inline uint64_t fnv1a(const void* data, size_t n,
                      uint64_t seed = 0xcbf29ce484222325ULL) {
  auto p = static_cast<const uint8_t*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

/// Where `key` lives first: its home slot among `slots`.
inline uint64_t home_slot(const std::string& key, uint64_t slots) {
  return fnv1a(key.data(), key.size()) % slots;
}

/// The checksum of a slot image (bytes [0, at::checksum)), mixed so that
/// it is never 0 for a used slot.
inline uint64_t slot_checksum(const uint8_t* slot) {
  auto h = fnv1a(slot, at::checksum, 0x84222325cbf29ce4ULL);
  h ^= h >> 29;
  return h | 1;
}

inline uint64_t load_u64(const uint8_t* p) {
  uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t x;
  std::memcpy(&x, p, 4);
  return x;
}
inline uint16_t load_u16(const uint8_t* p) {
  uint16_t x;
  std::memcpy(&x, p, 2);
  return x;
}

/// Writes the table header at `p` (header_bytes).
inline void write_header(uint8_t* p, uint64_t slots, uint32_t max_probes) {
  std::memset(p, 0, header_bytes);
  uint32_t layout = layout_version;
  uint32_t size = slot_bytes;
  std::memcpy(p + hdr::magic, &table_magic, 8);
  std::memcpy(p + hdr::layout, &layout, 4);
  std::memcpy(p + hdr::slot_size, &size, 4);
  std::memcpy(p + hdr::slots, &slots, 8);
  std::memcpy(p + hdr::max_probes, &max_probes, 4);
}

/// The geometry a client learns from the header.
struct geometry {
  uint64_t slots = 0;
  uint32_t max_probes = 0;
};

/// Checks a header read from a peer (untrusted) against a region of
/// `region_bytes`; returns an empty string and sets `*out`, or says what
/// is wrong.
inline std::string read_header(const uint8_t* p, uint64_t region_bytes,
                               geometry* out) {
  if (region_bytes < header_bytes)
    return "the table region has " + std::to_string(region_bytes)
           + " bytes, less than its header";
  if (load_u64(p + hdr::magic) != table_magic)
    return "the region does not start with an rdmactor-kv table header";
  if (load_u32(p + hdr::layout) != layout_version)
    return "the table has layout version "
           + std::to_string(load_u32(p + hdr::layout)) + ", this client reads "
           + std::to_string(layout_version);
  if (load_u32(p + hdr::slot_size) != slot_bytes)
    return "the table's slots have "
           + std::to_string(load_u32(p + hdr::slot_size))
           + " bytes, this client expects " + std::to_string(slot_bytes);
  auto slots = load_u64(p + hdr::slots);
  auto probes = load_u32(p + hdr::max_probes);
  if (slots == 0 || slots > (region_bytes - header_bytes) / slot_bytes)
    return "the header claims " + std::to_string(slots)
           + " slots, which do not fit the region of "
           + std::to_string(region_bytes) + " bytes";
  if (probes == 0 || probes > slots)
    return "the header claims " + std::to_string(probes) + " probes for "
           + std::to_string(slots) + " slots";
  out->slots = slots;
  out->max_probes = probes;
  return {};
}

/// What a reader makes of a slot image.
enum class slot_read {
  empty, ///< never written: the key is not in the table
  used,  ///< a consistent image of a used slot (key and value valid)
  torn,  ///< a write raced the read (odd or mismatched version, bad
         ///< checksum): read it again
  bad,   ///< consistent but impossible contents (a broken or hostile server)
};

/// A used slot's contents.
struct slot_view {
  uint64_t version = 0;
  std::string key;
  std::string value;
};

/// Checks the slot image at `p` (slot_bytes, a private copy: it does not
/// change while this runs); fills `*out` for `slot_read::used`.
inline slot_read read_slot(const uint8_t* p, slot_view* out) {
  auto begin = load_u64(p + at::begin);
  auto end = load_u64(p + at::end);
  if (begin != end || (begin & 1) != 0)
    return slot_read::torn;
  if (begin == 0)
    return slot_read::empty;
  if (load_u64(p + at::checksum) != slot_checksum(p))
    return slot_read::torn;
  auto key_len = load_u16(p + at::key_len);
  auto value_len = load_u16(p + at::value_len);
  if (load_u32(p + at::state) != 1 || key_len == 0 || key_len > key_max_bytes
      || value_len > value_max_bytes)
    return slot_read::bad;
  out->version = begin;
  out->key.assign(reinterpret_cast<const char*>(p + at::key), key_len);
  out->value.assign(reinterpret_cast<const char*>(p + at::value), value_len);
  return slot_read::used;
}

/// Returns the key of the slot at `p` in the server's own table (only the
/// server writes it, so its own reads need no seqlock); empty when the
/// slot is empty.
inline std::string key_of(const uint8_t* p) {
  if (load_u64(p + at::begin) == 0)
    return {};
  auto n = load_u16(p + at::key_len);
  return std::string(reinterpret_cast<const char*>(p + at::key),
                     n <= key_max_bytes ? n : 0);
}

/// Returns the value of the used slot at `p` in the server's own table.
inline std::string value_of(const uint8_t* p) {
  auto n = load_u16(p + at::value_len);
  return std::string(reinterpret_cast<const char*>(p + at::value),
                     n <= value_max_bytes ? n : 0);
}

/// Writes `key` and `value` into the slot at `p` (in registered memory that
/// peers read concurrently) as a seqlock: both version words odd, fence,
/// the contents and the checksum, fence, `end` even, fence, `begin` even.
/// Only one thread writes a table.  Returns the slot's new version.
/// Preconditions (checked by the caller): 1 <= key.size() <= key_max_bytes,
/// value.size() <= value_max_bytes.
inline uint64_t write_slot(uint8_t* p, const std::string& key,
                           const std::string& value) {
  auto* begin = reinterpret_cast<uint64_t*>(p + at::begin);
  auto* end = reinterpret_cast<uint64_t*>(p + at::end);
  uint64_t old = __atomic_load_n(begin, __ATOMIC_RELAXED);
  uint64_t next = old + 2;
  // The image, staged privately, with the final version in `begin`.
  uint8_t img[slot_bytes] = {};
  uint32_t state = 1;
  auto key_len = static_cast<uint16_t>(key.size());
  auto value_len = static_cast<uint16_t>(value.size());
  std::memcpy(img + at::begin, &next, 8);
  std::memcpy(img + at::state, &state, 4);
  std::memcpy(img + at::key_len, &key_len, 2);
  std::memcpy(img + at::value_len, &value_len, 2);
  std::memcpy(img + at::key, key.data(), key.size());
  std::memcpy(img + at::value, value.data(), value.size());
  uint64_t sum = slot_checksum(img);
  std::memcpy(img + at::checksum, &sum, 8);
  __atomic_store_n(begin, old + 1, __ATOMIC_RELAXED);
  __atomic_store_n(end, old + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  std::memcpy(p + at::state, img + at::state, at::end - at::state);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  __atomic_store_n(end, next, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  __atomic_store_n(begin, next, __ATOMIC_RELAXED);
  return next;
}

} // namespace kv
