#pragma once

// Internal to remote actors: CAF 0.17's binary format of the element types
// most actor messages carry (atoms, integers, bools, strings, byte
// vectors), written and read without CAF's data processors.  A value goes
// through a serializer as a chain of virtual calls, each returning a
// caf::error; these types need a few byte moves.  Used by actor_codec for
// messages whose every element is of such a type; anything else, and any
// input not in the exact form CAF writes, goes the general way.  Not
// installed.

#include <cstddef>
#include <cstdint>

#include <caf/fwd.hpp>
#include <caf/type_erased_value.hpp>

namespace rdmactor {

/// An element type with a direct encoding, or `none`.
enum class direct_kind : uint8_t {
  none,
  atom,
  boolean,
  int8,
  uint8,
  int16,
  uint16,
  int32,
  uint32,
  int64,
  uint64,
  string,
  char_vector,
  byte_vector,
};

/// The direct kind of a message element of CAF type `type` (its type
/// number, or the type_info of an unnumbered type), `none` for any other.
direct_kind direct_kind_of(caf::rtti_pair type) noexcept;

/// The number of bytes CAF's binary serializer writes for `value`, an
/// object of `kind`'s type (one at least); 0 for a sequence too long for
/// CAF's 32-bit lengths, which the caller then writes the general way.
size_t direct_size(direct_kind kind, const void* value) noexcept;

/// Writes the `direct_size` bytes of `value` at `out` and returns the
/// position behind them.  Requires `direct_size(kind, value) > 0`.
char* write_direct(direct_kind kind, const void* value, char* out) noexcept;

/// Reads a value of `kind`'s type from `[pos, end)` into `value` (an
/// object of that type) and returns the position behind it; null when the
/// bytes are short or not in the form CAF's serializer writes (a length
/// in more bytes than needed, or beyond 32 bits), which the caller then
/// loads the general way.
const uint8_t* load_direct(direct_kind kind, void* value, const uint8_t* pos,
                           const uint8_t* end);

} // namespace rdmactor
