#pragma once

// Internal to actors/remote/actor_codec.cpp: the data processors that
// write and read remote-actor messages in CAF's binary format with the
// checks untrusted bytes need (finite floats, bounded sequences and
// nesting, banned types, the connection's cached type lists).  Tested
// through actor_codec_test and the actor_codec fuzz target.  Not
// installed.

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/deserializer.hpp>
#include <caf/node_id.hpp>
#include <caf/serializer.hpp>

#include "actors/remote/actor_codec.hpp"
#include "actors/remote/message_signatures.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor::codec_detail {

/// Levels of messages inside messages (through the context of a
/// caf::error) that a peer may send.
constexpr int max_message_nesting = 16;

/// Levels of nested values (messages, objects, sequences: lists, maps,
/// config values, containers of containers) that a peer may send.  CAF
/// loads every level recursively, so the bound keeps a peer's bytes from
/// overflowing the agent's stack (20,000 nested config_value lists fit in
/// 40 KB); honest payloads nest a few levels.
constexpr int max_value_nesting = 64;

inline std::string nested_too_deep() {
  return "the peer sent a message nested more than "
         + std::to_string(max_message_nesting) + " levels deep";
}

inline std::string values_too_deep() {
  return "the peer sent values nested more than "
         + std::to_string(max_value_nesting)
         + " levels deep (lists, maps, config values, messages)";
}

/// CAF's data-processor interface (Base: caf::serializer or
/// caf::deserializer) forwarded to CAF's binary format (Inner), refusing
/// floating-point values that are not finite in both directions: CAF
/// 0.17's IEEE-754 packing (caf/detail/ieee_754.hpp) halves an infinity
/// until it is below 2, which never happens, so a sending thread would
/// spin forever, and writes an arbitrary number for a NaN; its unpacking
/// turns the largest exponent into an infinity, which an actor that echoed
/// or forwarded a peer's value would then send.  The first refusal is
/// kept (`refusal`) because `caf::message`'s saving drops an element's
/// error (and its loading may), so callers check it besides the result.
template <class Base, class Inner>
class binary_processor : public Base {
public:
  template <class... Ts>
  explicit binary_processor(caf::actor_system& sys, Ts&&... xs)
      : Base(sys), inner_(sys, std::forward<Ts>(xs)...) {}

  /// With `ctx` as the context CAF's handle loading asks for the proxies
  /// of remote actors (its proxy registry).
  template <class... Ts>
  explicit binary_processor(caf::execution_unit* ctx, Ts&&... xs)
      : Base(ctx), inner_(ctx, std::forward<Ts>(xs)...) {}

  const caf::error& refusal() const noexcept {
    return refusal_;
  }

  /// Whether a node id went through (its implementation tag, CAF's
  /// "default" atom, was written or read): every actor handle writes one.
  /// A plain integer of the same value sets it too; callers only use it to
  /// skip looking for a node id where none can be.
  bool node_ids() const noexcept {
    return node_ids_;
  }

  caf::error begin_object(uint16_t& nr, std::string& name) override {
    return inner_.begin_object(nr, name);
  }

  caf::error end_object() override {
    return inner_.end_object();
  }

  caf::error begin_sequence(size_t& num) override {
    return inner_.begin_sequence(num);
  }

  caf::error end_sequence() override {
    return inner_.end_sequence();
  }

  caf::error apply_raw(size_t num_bytes, void* data) override {
    return inner_.apply_raw(num_bytes, data);
  }

protected:
  caf::error apply_impl(int8_t& x) override {
    return inner_.apply(x);
  }
  caf::error apply_impl(uint8_t& x) override {
    return inner_.apply(x);
  }
  caf::error apply_impl(int16_t& x) override {
    return inner_.apply(x);
  }
  caf::error apply_impl(uint16_t& x) override {
    return inner_.apply(x);
  }
  caf::error apply_impl(int32_t& x) override {
    return inner_.apply(x);
  }
  caf::error apply_impl(uint32_t& x) override {
    return inner_.apply(x);
  }
  caf::error apply_impl(int64_t& x) override {
    return inner_.apply(x);
  }
  caf::error apply_impl(uint64_t& x) override {
    auto err = inner_.apply(x);
    if (x == static_cast<uint64_t>(caf::node_id::default_data::class_id))
      node_ids_ = true;
    return err;
  }
  caf::error apply_impl(float& x) override {
    return checked_float(x);
  }
  caf::error apply_impl(double& x) override {
    return checked_float(x);
  }
  caf::error apply_impl(long double& x) override {
    return checked_float(x);
  }
  caf::error apply_impl(std::string& x) override {
    return inner_.apply(x);
  }
  caf::error apply_impl(std::u16string& x) override {
    return inner_.apply(x);
  }
  caf::error apply_impl(std::u32string& x) override {
    return inner_.apply(x);
  }

  /// Keeps the first refusal and returns it.
  caf::error refuse(std::string what) {
    if (!refusal_)
      refusal_ = make_error(errc::serialization_failed, std::move(what));
    return refusal_;
  }

  Inner inner_;

private:
  /// Checks before writing (serializer) or after reading (deserializer).
  template <class T>
  caf::error checked_float(T& x) {
    constexpr bool sending = Base::reads_state;
    if (!sending)
      if (auto err = inner_.apply(x))
        return err;
    if (!std::isfinite(x))
      return refuse(sending
                        ? "the message holds a floating-point value that is "
                          "not finite (infinity or NaN), which CAF's binary "
                          "format cannot carry (CAF 0.17 would loop forever "
                          "on an infinity): send a finite value, or encode "
                          "it yourself (e.g. as a string or a flag)"
                        : "the peer sent a floating-point value that is not "
                          "finite (infinity or NaN), which CAF's binary "
                          "format cannot carry");
    return sending ? inner_.apply(x) : caf::error{};
  }

  caf::error refusal_;
  bool node_ids_ = false;
};

/// Finds the type list at `pos` (`left` bytes) in `signatures` by its
/// bytes, when it is written as CAF writes a short one: type number 0 (two
/// bytes), a one-byte length (a list under 128 bytes) and the names.
/// Returns null otherwise; sets `header` to the list's bytes when found.
inline const message_signature*
find_short_list(const uint8_t* pos, size_t left,
                const message_signatures& signatures, size_t& header) {
  if (left < 3 || pos[0] != 0 || pos[1] != 0 || pos[2] >= 0x80
      || left - 3 < pos[2])
    return nullptr;
  std::string_view names{reinterpret_cast<const char*>(pos + 3), pos[2]};
  const auto* sig = signatures.find(names);
  if (sig != nullptr)
    header = 3 + names.size();
  return sig;
}

/// Writes CAF's binary format, refusing what binary_processor refuses.
class finite_serializer final
    : public binary_processor<caf::serializer, caf::binary_serializer> {
public:
  finite_serializer(caf::actor_system& sys, std::vector<char>& buf)
      : binary_processor(sys, buf) {}
};

/// Reads CAF's binary format, refusing besides what binary_processor
/// refuses: sequences longer than the bytes left (CAF's own resizes a byte
/// vector to whatever length the input claims before reading it), message
/// type lists that name banned types, messages nested deeper than
/// max_message_nesting and values nested deeper than max_value_nesting.
/// After a refusal every further object or sequence is refused too, so no
/// recursion goes on below the level that was cut.
class bounded_deserializer final
    : public binary_processor<caf::deserializer, caf::binary_deserializer> {
public:
  bounded_deserializer(caf::actor_system& sys, const uint8_t* data, size_t len)
      : binary_processor(sys, reinterpret_cast<const char*>(data), len),
        data_(data), len_(len) {}

  bounded_deserializer(caf::execution_unit* ctx, const uint8_t* data,
                       size_t len)
      : binary_processor(ctx, reinterpret_cast<const char*>(data), len),
        data_(data), len_(len) {}

  size_t remaining() const noexcept {
    return inner_.remaining();
  }

  caf::error begin_object(uint16_t& nr, std::string& name) override {
    const message_signature* known = nullptr;
    return begin_checked(nr, name, nullptr, known);
  }

  /// begin_object for the outermost message: a type list `signatures`
  /// holds (`known`, set) was checked when it was made, so its names are
  /// not looked at again, nor copied into `name` (left as it was then).
  caf::error begin_message(uint16_t& nr, std::string& name,
                           const message_signatures& signatures,
                           const message_signature*& known) {
    if (values_ == 0 && !refusal() && (known = cached_list(signatures))) {
      nr = 0;
      return open_level(true);
    }
    return begin_checked(nr, name, &signatures, known);
  }

  caf::error end_object() override {
    if (values_ > 0) {
      if (values_ <= max_value_nesting
          && is_message_[static_cast<size_t>(values_)])
        --messages_;
      --values_;
    }
    return inner_.end_object();
  }

  caf::error begin_sequence(size_t& num) override {
    if (refusal())
      return refusal();
    if (auto err = inner_.begin_sequence(num))
      return err;
    if (++values_ > max_value_nesting)
      return refuse(values_too_deep());
    // Every element takes a byte at least; an element of zero bytes would
    // otherwise let a short message loop for 2^64 rounds.
    if (num > inner_.remaining())
      return refuse("a sequence of " + std::to_string(num)
                    + " elements in a message of "
                    + std::to_string(inner_.remaining()) + " bytes left");
    return caf::none;
  }

  caf::error end_sequence() override {
    if (values_ > 0)
      --values_;
    return inner_.end_sequence();
  }

private:
  /// Finds the type list at the read position in `signatures` by its
  /// bytes and skips it, when it is written as CAF writes a short one:
  /// type number 0 (two bytes), a one-byte length (a list under 128
  /// bytes) and the names; null (nothing read) otherwise.
  const message_signature* cached_list(const message_signatures& signatures) {
    auto left = inner_.remaining();
    size_t header = 0;
    const auto* sig
        = find_short_list(data_ + (len_ - left), left, signatures, header);
    if (sig != nullptr)
      inner_.skip(header);
    return sig;
  }

  /// Counts an object opened (a message or not): CAF loads nested objects
  /// and sequences recursively, so a peer could otherwise overflow the
  /// stack with a deep enough nest.
  caf::error open_level(bool message) {
    if (++values_ > max_value_nesting)
      return refuse(values_too_deep());
    is_message_[static_cast<size_t>(values_)] = message;
    if (message && ++messages_ > max_message_nesting)
      return refuse(nested_too_deep());
    return caf::none;
  }

  caf::error begin_checked(uint16_t& nr, std::string& name,
                           const message_signatures* signatures,
                           const message_signature*& known) {
    if (refusal())
      return refusal();
    if (auto err = inner_.begin_object(nr, name))
      return err;
    // An empty message: CAF's message::load reads nothing more and returns
    // without end_object, so it opens no level (counted, every empty
    // message side by side added a level that never closed).
    if (name == "@<>")
      return caf::none;
    // Objects are the messages (type list "@<>+...") CAF nests through
    // the context of an error.
    auto message = name.compare(0, 3, "@<>") == 0;
    if (auto err = open_level(message))
      return err;
    if (message && signatures != nullptr
        && (known = signatures->find(name)) != nullptr)
      return caf::none;
    // The type list of a message: "@<>+name+name...".
    if (message) {
      size_t pos = 3;
      while (pos < name.size()) {
        auto next = name.find('+', pos + 1);
        auto part
            = name.substr(pos + 1, next == std::string::npos ? std::string::npos
                                                             : next - pos - 1);
        if (banned_type_name(part))
          return refuse("the peer sent a message with a " + part
                        + ", which cannot travel between nodes");
        if (next == std::string::npos)
          break;
        pos = next;
      }
    }
    return caf::none;
  }

  /// The serialization: the read position is `data_ + len_ - remaining()`.
  const uint8_t* data_;
  size_t len_;
  /// Open objects and sequences.
  int values_ = 0;
  /// Open messages among them.
  int messages_ = 0;
  /// Whether the object opened at each level is a message.
  std::array<bool, max_value_nesting + 1> is_message_{};
};

} // namespace rdmactor::codec_detail
