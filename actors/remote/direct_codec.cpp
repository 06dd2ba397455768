#include "actors/remote/direct_codec.hpp"

#include <cstring>
#include <string>
#include <typeinfo>
#include <vector>

#include <caf/atom.hpp>
#include <caf/type_nr.hpp>

namespace rdmactor {

namespace {

template <class T>
constexpr uint16_t nr = caf::type_nr<T>::value;

/// `x` in network byte order (CAF writes integers so).
inline uint8_t to_network(uint8_t x) {
  return x;
}
inline uint16_t to_network(uint16_t x) {
  return __builtin_bswap16(x);
}
inline uint32_t to_network(uint32_t x) {
  return __builtin_bswap32(x);
}
inline uint64_t to_network(uint64_t x) {
  return __builtin_bswap64(x);
}
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "to_network assumes a little-endian host");

// An integer element may be of any type of its size and signedness (CAF
// numbers `long` as int64_t): read and written by size.

template <class U>
char* put_int(const void* value, char* out) {
  U x;
  std::memcpy(&x, value, sizeof(U));
  x = to_network(x);
  std::memcpy(out, &x, sizeof(U));
  return out + sizeof(U);
}

template <class U>
const uint8_t* get_int(void* value, const uint8_t* pos, const uint8_t* end) {
  if (static_cast<size_t>(end - pos) < sizeof(U))
    return nullptr;
  U x;
  std::memcpy(&x, pos, sizeof(U));
  x = to_network(x);
  std::memcpy(value, &x, sizeof(U)); // the element's type has U's size
  return pos + sizeof(U);
}

/// The bytes of a sequence's length `n` (below 2^32) in CAF's form.
size_t length_size(size_t n) {
  size_t bytes = 1;
  for (auto x = static_cast<uint32_t>(n); x > 0x7f; x >>= 7)
    ++bytes;
  return bytes;
}

/// Writes a sequence's length `n` (below 2^32) as CAF's begin_sequence
/// does, seven bits a byte, least significant first, and returns the
/// position behind it.
char* put_length(size_t n, char* out) {
  auto x = static_cast<uint32_t>(n);
  while (x > 0x7f) {
    *out++ = static_cast<char>((x & 0x7f) | 0x80);
    x >>= 7;
  }
  *out++ = static_cast<char>(x);
  return out;
}

/// Reads a length in exactly the form put_length writes (CAF's reader
/// takes longer forms too: those go the general way) and no longer than
/// the bytes behind it.
const uint8_t* get_length(size_t& n, const uint8_t* pos, const uint8_t* end) {
  uint32_t x = 0;
  for (int i = 0; i < 5; ++i) {
    if (pos == end)
      return nullptr;
    auto byte = *pos++;
    if (i == 4 && byte > 0x0f)
      return nullptr; // beyond 32 bits, or a fifth continuation
    x |= static_cast<uint32_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      if (i > 0 && byte == 0)
        return nullptr; // a trailing zero group: not the shortest form
      if (x > static_cast<size_t>(end - pos))
        return nullptr;
      n = x;
      return pos;
    }
  }
  return nullptr;
}

template <class Seq>
size_t bytes_size(const Seq& xs) {
  return xs.size() > UINT32_MAX ? 0 : length_size(xs.size()) + xs.size();
}

template <class Seq>
char* put_bytes(const Seq& xs, char* out) {
  out = put_length(xs.size(), out);
  if (!xs.empty())
    std::memcpy(out, xs.data(), xs.size());
  return out + xs.size();
}

template <class Seq>
const uint8_t* get_bytes(void* value, const uint8_t* pos, const uint8_t* end) {
  size_t n = 0;
  pos = get_length(n, pos, end);
  if (pos == nullptr)
    return nullptr;
  using char_type = typename Seq::value_type;
  const auto* p = reinterpret_cast<const char_type*>(pos);
  static_cast<Seq*>(value)->assign(p, p + n);
  return pos + n;
}

/// The bytes of an integer kind (an atom is a 64-bit integer); 0 for the
/// other kinds.
size_t int_bytes(direct_kind kind) noexcept {
  switch (kind) {
    case direct_kind::int8:
    case direct_kind::uint8:
      return 1;
    case direct_kind::int16:
    case direct_kind::uint16:
      return 2;
    case direct_kind::int32:
    case direct_kind::uint32:
      return 4;
    case direct_kind::atom:
    case direct_kind::int64:
    case direct_kind::uint64:
      return 8;
    default:
      return 0;
  }
}

} // namespace

direct_kind direct_kind_of(caf::rtti_pair type) noexcept {
  switch (type.first) {
    case nr<caf::atom_value>:
      return direct_kind::atom;
    case nr<bool>:
      return direct_kind::boolean;
    case nr<int8_t>:
      return direct_kind::int8;
    case nr<uint8_t>:
      return direct_kind::uint8;
    case nr<int16_t>:
      return direct_kind::int16;
    case nr<uint16_t>:
      return direct_kind::uint16;
    case nr<int32_t>:
      return direct_kind::int32;
    case nr<uint32_t>:
      return direct_kind::uint32;
    case nr<int64_t>:
      return direct_kind::int64;
    case nr<uint64_t>:
      return direct_kind::uint64;
    case nr<std::string>:
      return direct_kind::string;
    case nr<std::vector<char>>:
      return direct_kind::char_vector;
    case 0:
      // Unnumbered: a byte vector by its C++ type, whatever name it was
      // registered under (its bytes are CAF's byte-sequence form).
      if (type.second != nullptr
          && *type.second == typeid(std::vector<uint8_t>))
        return direct_kind::byte_vector;
      return direct_kind::none;
    default:
      return direct_kind::none;
  }
}

size_t direct_size(direct_kind kind, const void* value) noexcept {
  if (auto n = int_bytes(kind))
    return n;
  switch (kind) {
    case direct_kind::boolean:
      return 1;
    case direct_kind::string:
      return bytes_size(*static_cast<const std::string*>(value));
    case direct_kind::char_vector:
      return bytes_size(*static_cast<const std::vector<char>*>(value));
    case direct_kind::byte_vector:
      return bytes_size(*static_cast<const std::vector<uint8_t>*>(value));
    default:
      return 0;
  }
}

char* write_direct(direct_kind kind, const void* value, char* out) noexcept {
  switch (int_bytes(kind)) {
    case 1:
      return put_int<uint8_t>(value, out);
    case 2:
      return put_int<uint16_t>(value, out);
    case 4:
      return put_int<uint32_t>(value, out);
    case 8:
      return put_int<uint64_t>(value, out);
    default:
      break;
  }
  switch (kind) {
    case direct_kind::boolean:
      *out = *static_cast<const bool*>(value) ? 1 : 0;
      return out + 1;
    case direct_kind::string:
      return put_bytes(*static_cast<const std::string*>(value), out);
    case direct_kind::char_vector:
      return put_bytes(*static_cast<const std::vector<char>*>(value), out);
    case direct_kind::byte_vector:
      return put_bytes(*static_cast<const std::vector<uint8_t>*>(value), out);
    default:
      return out;
  }
}

const uint8_t* load_direct(direct_kind kind, void* value, const uint8_t* pos,
                           const uint8_t* end) {
  switch (int_bytes(kind)) {
    case 1:
      return get_int<uint8_t>(value, pos, end);
    case 2:
      return get_int<uint16_t>(value, pos, end);
    case 4:
      return get_int<uint32_t>(value, pos, end);
    case 8:
      return get_int<uint64_t>(value, pos, end);
    default:
      break;
  }
  switch (kind) {
    case direct_kind::boolean:
      if (pos == end)
        return nullptr;
      *static_cast<bool*>(value) = *pos != 0; // as CAF reads a bool
      return pos + 1;
    case direct_kind::string:
      return get_bytes<std::string>(value, pos, end);
    case direct_kind::char_vector:
      return get_bytes<std::vector<char>>(value, pos, end);
    case direct_kind::byte_vector:
      return get_bytes<std::vector<uint8_t>>(value, pos, end);
    default:
      return nullptr;
  }
}

} // namespace rdmactor
