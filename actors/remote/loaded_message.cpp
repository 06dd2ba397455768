#include "actors/remote/loaded_message.hpp"

#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <typeinfo>
#include <vector>

#include <caf/atom.hpp>
#include <caf/deserializer.hpp>
#include <caf/detail/dynamic_message_data.hpp>
#include <caf/detail/type_erased_value_impl.hpp>
#include <caf/serializer.hpp>
#include <caf/timespan.hpp>
#include <caf/timestamp.hpp>
#include <caf/type_nr.hpp>

namespace rdmactor {

namespace {

/// A type whose values a loaded message holds in place.
struct known_type {
  caf::type_erased_value* (*construct)(void* where);
  size_t size;
  size_t align;
};

template <class T>
caf::type_erased_value* construct_in_place(void* where) {
  return new (where) caf::detail::type_erased_value_impl<T>();
}

template <class T>
constexpr known_type known() {
  using impl = caf::detail::type_erased_value_impl<T>;
  return {construct_in_place<T>, sizeof(impl), alignof(impl)};
}

/// The element types of most messages: numbers, atoms, strings and byte
/// vectors.
constexpr known_type known_types[] = {
    known<caf::atom_value>(),
    known<bool>(),
    known<int8_t>(),
    known<int16_t>(),
    known<int32_t>(),
    known<int64_t>(),
    known<uint8_t>(),
    known<uint16_t>(),
    known<uint32_t>(),
    known<uint64_t>(),
    known<float>(),
    known<double>(),
    known<std::string>(),
    known<std::vector<char>>(),
    known<std::vector<uint8_t>>(),
    known<caf::timestamp>(),
    known<caf::timespan>(),
};

constexpr size_t largest_known = [] {
  size_t n = 0;
  for (auto& k : known_types)
    n = k.size > n ? k.size : n;
  return n;
}();

/// Returns the known type whose in-place value has `proto`'s very class,
/// or null.
const known_type* known_type_of(const caf::type_erased_value& proto) {
  alignas(std::max_align_t) unsigned char probe[largest_known];
  for (auto& k : known_types) {
    auto* x = k.construct(probe);
    bool same = typeid(*x) == typeid(proto);
    x->~type_erased_value();
    if (same)
      return &k;
  }
  return nullptr;
}

constexpr size_t round_up(size_t n, size_t align) {
  return (n + align - 1) / align * align;
}

/// Bytes of the object in front of its storage.
constexpr size_t header_bytes
    = round_up(sizeof(loaded_message_data), alignof(std::max_align_t));

/// Bytes in front of the object that hold its distance from the start of
/// its block (the companion room and these bytes), read by operator delete
/// after the object is gone.
constexpr size_t back_bytes = alignof(std::max_align_t);
static_assert(back_bytes >= sizeof(size_t));

/// The companion room for `bytes`.
constexpr size_t room_for(size_t bytes) {
  return round_up(bytes, alignof(std::max_align_t));
}

} // namespace

message_layout
layout_of(const std::vector<caf::type_erased_value_ptr>& prototypes) {
  message_layout result;
  result.type_token = 0xFFFFFFFF;
  result.slots.reserve(prototypes.size());
  size_t offset = 0;
  for (const auto& proto : prototypes) {
    result.type_token
        = caf::add_to_type_token(result.type_token, proto->type().first);
    element_slot slot;
    slot.direct = direct_kind_of(proto->type());
    if (auto* k = known_type_of(*proto)) {
      offset = round_up(offset, k->align);
      slot.construct = k->construct;
      slot.offset = offset;
      offset += k->size;
    }
    result.slots.push_back(slot);
  }
  result.storage_bytes = offset;
  result.all_direct = !result.slots.empty();
  for (const auto& slot : result.slots)
    result.all_direct = result.all_direct && slot.direct != direct_kind::none;
  return result;
}

// -- loaded_message_data
// --------------------------------------------------------

caf::intrusive_ptr<loaded_message_data> loaded_message_data::make(
    const message_layout& layout,
    const std::vector<caf::type_erased_value_ptr>& prototypes,
    size_t companion_bytes) {
  // [companion room][back_bytes: distance to the block's start][the
  // object][its storage]
  const size_t back = room_for(companion_bytes) + back_bytes;
  auto* block = static_cast<unsigned char*>(
      ::operator new(back + header_bytes + layout.storage_bytes));
  auto* where = block + back;
  std::memcpy(where - sizeof(size_t), &back, sizeof(size_t));
  // Owned from here: an element that fails to copy frees what was made.
  caf::intrusive_ptr<loaded_message_data> result{
      new (where) loaded_message_data(layout.type_token), false};
  auto& self = *result;
  self.companion_bytes_ = static_cast<uint32_t>(companion_bytes);
  for (size_t i = 0; i < layout.slots.size(); ++i) {
    const auto& slot = layout.slots[i];
    if (slot.construct != nullptr) {
      self.elements_[i] = slot.construct(self.storage() + slot.offset);
    } else {
      self.elements_[i] = prototypes[i]->copy().release();
      self.on_heap_ |= uint32_t{1} << i;
    }
    ++self.size_;
  }
  return result;
}

loaded_message_data::~loaded_message_data() {
  for (size_t i = 0; i < size_; ++i) {
    if (on_heap_ & (uint32_t{1} << i))
      delete elements_[i];
    else
      elements_[i]->~type_erased_value();
  }
}

void loaded_message_data::operator delete(void* ptr) noexcept {
  auto* where = static_cast<unsigned char*>(ptr);
  size_t back = 0;
  std::memcpy(&back, where - sizeof(size_t), sizeof(size_t));
  ::operator delete(where - back);
}

void* loaded_message_data::take_companion(caf::message& msg,
                                          size_t bytes) noexcept {
  const auto* data = msg.cvals().get();
  // (A type check, not a dynamic_cast: the class is final.)
  if (data == nullptr || typeid(*data) != typeid(loaded_message_data))
    return nullptr;
  // Ours and not shared: the loader made it and handed it on unseen.
  auto* self = const_cast<loaded_message_data*>(
      static_cast<const loaded_message_data*>(data));
  if (self->companion_taken_ || bytes == 0
      || room_for(self->companion_bytes_) != room_for(bytes) || !self->unique())
    return nullptr;
  self->companion_taken_ = true;
  self->ref(); // the companion's hold, released by release_companion
  return reinterpret_cast<unsigned char*>(self) - back_bytes
         - room_for(self->companion_bytes_);
}

void loaded_message_data::release_companion(void* room, size_t bytes) noexcept {
  // take_companion checked that the room is room_for(bytes): the object
  // sits right behind it.
  auto* self = reinterpret_cast<loaded_message_data*>(
      static_cast<unsigned char*>(room) + room_for(bytes) + back_bytes);
  self->deref();
}

unsigned char* loaded_message_data::storage() noexcept {
  return reinterpret_cast<unsigned char*>(this) + header_bytes;
}

caf::detail::message_data* loaded_message_data::copy() const {
  caf::detail::dynamic_message_data::elements xs;
  xs.reserve(size_);
  for (size_t i = 0; i < size_; ++i)
    xs.emplace_back(elements_[i]->copy());
  return new caf::detail::dynamic_message_data(std::move(xs));
}

void* loaded_message_data::get_mutable(size_t pos) {
  return elements_[pos]->get_mutable();
}

caf::error loaded_message_data::load(size_t pos, caf::deserializer& source) {
  return elements_[pos]->load(source);
}

size_t loaded_message_data::size() const noexcept {
  return size_;
}

uint32_t loaded_message_data::type_token() const noexcept {
  return type_token_;
}

caf::rtti_pair loaded_message_data::type(size_t pos) const noexcept {
  return elements_[pos]->type();
}

const void* loaded_message_data::get(size_t pos) const noexcept {
  return elements_[pos]->get();
}

std::string loaded_message_data::stringify(size_t pos) const {
  return elements_[pos]->stringify();
}

caf::type_erased_value_ptr loaded_message_data::copy(size_t pos) const {
  return elements_[pos]->copy();
}

caf::error loaded_message_data::save(size_t pos, caf::serializer& sink) const {
  return elements_[pos]->save(sink);
}

} // namespace rdmactor
