#pragma once

// Internal to remote actors: the data of a message loaded from a peer, its
// elements in one allocation with the message.  Not installed.

#include <cstddef>
#include <cstdint>
#include <vector>

#include <caf/detail/message_data.hpp>
#include <caf/intrusive_ptr.hpp>
#include <caf/message.hpp>
#include <caf/type_erased_value.hpp>

#include "actors/remote/direct_codec.hpp"

namespace rdmactor {

/// Where one element of a loaded message lives: constructed in place in the
/// message's block (a type whose layout we know) or, with `construct` null,
/// copied onto the heap from its prototype (any other type).
struct element_slot {
  /// Constructs a default value of the element's type at `where`.
  caf::type_erased_value* (*construct)(void* where) = nullptr;
  /// Offset of the element in the message's storage.
  size_t offset = 0;
  /// How the element's value reads without CAF's deserializer (none: it
  /// does not).
  direct_kind direct = direct_kind::none;
};

/// How the elements of a message of one type list are laid out: a slot
/// each, the bytes of in-place storage and CAF's type token of the list.
struct message_layout {
  std::vector<element_slot> slots;
  size_t storage_bytes = 0;
  uint32_t type_token = 0;
  /// Every element has a direct kind (and there is one at least): a
  /// message of this list loads without CAF's deserializer.
  bool all_direct = false;
};

/// Lays out the elements of `prototypes` (default values of a type list's
/// elements, as CAF's type table makes them).  A type is placed in the
/// block only when constructing it in place gives the prototype's very
/// class; every other type is copied from its prototype.
message_layout
layout_of(const std::vector<caf::type_erased_value_ptr>& prototypes);

/// A message's data whose elements live in the same allocation (those of
/// known types: numbers, atoms, strings, byte vectors; others on the heap):
/// loading a peer's message costs one allocation for the message instead
/// of one for the message, one for its element list and one per element.
/// Behaves as CAF's `dynamic_message_data` does (the same elements and
/// type token); a copy (copy on write) is a `dynamic_message_data`.
class loaded_message_data final : public caf::detail::message_data {
public:
  /// Elements at most.
  static constexpr size_t max_elements = 16;

  /// Makes a message of default values laid out by `layout`, copying from
  /// `prototypes` what is not constructed in place.  Requires
  /// `layout.slots.size() <= max_elements` and as many prototypes.  With
  /// `companion_bytes`, the block has room in front for one object of that
  /// size (see take_companion): the mailbox element that carries the
  /// message, so that one allocation holds both.
  static caf::intrusive_ptr<loaded_message_data>
  make(const message_layout& layout,
       const std::vector<caf::type_erased_value_ptr>& prototypes,
       size_t companion_bytes = 0);

  /// Returns the room for a companion of `bytes` in the block of `msg`'s
  /// data, or null: the data is not a loaded message's, was made without
  /// room of that size, is shared, or the room was taken.  The block then stays
  /// until the companion released it (release_companion) and the message's last
  /// reference went, in either order.  Construct the companion in the room
  /// before anyone else can see `msg`.
  static void* take_companion(caf::message& msg, size_t bytes) noexcept;

  /// Ends a companion's hold on its block: call from the companion class's
  /// `operator delete` with the room and the `bytes` it was taken with.
  static void release_companion(void* room, size_t bytes) noexcept;

  ~loaded_message_data() override;

  /// Frees the block `make` allocated.
  static void operator delete(void* ptr) noexcept;

  /// Constructs in a block `make` allocated.
  static void* operator new(size_t, void* where) noexcept {
    return where;
  }

  // -- message_data ----------------------------------------------------------

  caf::detail::message_data* copy() const override;

  // -- type_erased_tuple -----------------------------------------------------

  void* get_mutable(size_t pos) override;

  caf::error load(size_t pos, caf::deserializer& source) override;

  size_t size() const noexcept override;

  uint32_t type_token() const noexcept override;

  caf::rtti_pair type(size_t pos) const noexcept override;

  const void* get(size_t pos) const noexcept override;

  std::string stringify(size_t pos) const override;

  caf::type_erased_value_ptr copy(size_t pos) const override;

  caf::error save(size_t pos, caf::serializer& sink) const override;

private:
  explicit loaded_message_data(uint32_t type_token) noexcept
      : type_token_(type_token) {}

  /// The in-place storage, right behind this object.
  unsigned char* storage() noexcept;

  /// The companion room in front of this object (0: none).
  uint32_t companion_bytes_ = 0;
  /// The room is taken.
  bool companion_taken_ = false;
  uint32_t type_token_;
  /// Elements made so far (all of them once `make` returns).
  size_t size_ = 0;
  /// Bit i set: element i is on the heap (deleted), not in place.
  uint32_t on_heap_ = 0;
  caf::type_erased_value* elements_[max_elements] = {};
};

} // namespace rdmactor
