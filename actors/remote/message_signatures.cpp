#include "actors/remote/message_signatures.hpp"

#include <typeinfo>
#include <utility>

#include <caf/duration.hpp>
#include <caf/error.hpp>
#include <caf/message.hpp>
#include <caf/type_nr.hpp>

namespace rdmactor {

namespace {

/// Whether actor_codec checks a loaded value of this type (see
/// check_loaded_values there): durations, errors and lists of messages.
bool checked_after_load(const caf::type_erased_value& proto) {
  auto type = proto.type();
  if (type.first == caf::type_nr<caf::duration>::value
      || type.first == caf::type_nr<caf::error>::value)
    return true;
  return type.first == 0 && type.second != nullptr
         && *type.second == typeid(std::vector<caf::message>);
}

} // namespace

const message_signature*
message_signatures::find(std::string_view names) const noexcept {
  for (const auto& e : entries_)
    if (e.names.size() == names.size() && !e.names.empty() && e.names == names)
      return &e;
  return nullptr;
}

const message_signature*
message_signatures::make(const caf::uniform_type_info_map& types,
                         const std::string& names, std::string& unknown,
                         message_signature& scratch) {
  // "@<>+a+b": the names after the prefix, separated by '+'.
  constexpr size_t prefix = 4;
  size_t elements = 1;
  for (size_t i = prefix; i < names.size(); ++i)
    elements += names[i] == '+' ? 1 : 0;
  bool keep = elements <= max_elements;
  auto& sig = keep ? entries_[next_] : scratch;
  sig.names.clear();
  sig.prototypes.clear();
  sig.checked_after_load = false;
  sig.prototypes.reserve(elements);
  std::string name;
  for (size_t pos = prefix; pos <= names.size();) {
    auto end = names.find('+', pos);
    if (end == std::string::npos)
      end = names.size();
    name.assign(names, pos, end - pos);
    auto proto = types.make_value(name);
    if (!proto) {
      unknown = std::move(name);
      sig.prototypes.clear();
      return nullptr;
    }
    sig.checked_after_load
        = sig.checked_after_load || checked_after_load(*proto);
    sig.prototypes.emplace_back(std::move(proto));
    pos = end + 1;
  }
  // Only a kept list's messages load into one block (a longer list loads
  // element by element, and its layout would cost a probe per element on
  // every message).
  static_assert(loaded_message_data::max_elements >= max_elements);
  sig.layout = keep ? layout_of(sig.prototypes) : message_layout{};
  sig.names = names;
  ++made_;
  if (keep)
    next_ = (next_ + 1) % capacity;
  return &sig;
}

} // namespace rdmactor
