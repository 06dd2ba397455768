#include "actors/remote/actor_codec.hpp"

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>

#include <caf/atom.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/deserializer.hpp>
#include <caf/detail/dynamic_message_data.hpp>
#include <caf/duration.hpp>
#include <caf/make_counted.hpp>
#include <caf/node_id.hpp>
#include <caf/rtti_pair.hpp>
#include <caf/sec.hpp>
#include <caf/serializer.hpp>
#include <caf/uniform_type_info_map.hpp>

#include "actors/remote/codec_processors.hpp"
#include "actors/remote/direct_codec.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor {

using namespace codec_detail;

namespace {

/// Loads the peer's message as CAF 0.17's message::load does (the type
/// list, each element, the end of the object), taking the elements' types
/// from `signatures` instead of looking each name up in CAF's type table
/// (a linear search of its built-in names, then a hash map).  Sets
/// `checked` to whether an element needs check_loaded_values.
caf::error load_message(bounded_deserializer& source, caf::actor_system& sys,
                        message_signatures& signatures, caf::message& msg,
                        bool& checked, size_t companion_bytes) {
  uint16_t zero = 0;
  // Keeps its capacity: a type list is longer than std::string's inline
  // 15 bytes, so a fresh one allocated per message.  Not used once the
  // elements load (a nested load cannot see it half-read).
  thread_local std::string names;
  const message_signature* sig = nullptr;
  if (auto err = source.begin_message(zero, names, signatures, sig))
    return err;
  if (zero != 0)
    return caf::sec::unknown_type;
  // A cached list (always "@<>+...") leaves `names` unread.
  std::optional<message_signature> scratch;
  if (sig == nullptr) {
    if (names == "@<>") {
      msg = caf::message{};
      checked = false;
      return caf::none;
    }
    if (names.compare(0, 4, "@<>+") != 0)
      return caf::sec::unknown_type;
    std::string unknown;
    sig = signatures.make(sys.types(), names, unknown, scratch.emplace());
    if (sig == nullptr)
      return caf::make_error(caf::sec::unknown_type, std::move(unknown));
  }
  checked = sig->checked_after_load;
  if (sig->layout.slots.size() == sig->prototypes.size()) {
    // One allocation for the message and its elements.
    auto data = loaded_message_data::make(sig->layout, sig->prototypes,
                                          companion_bytes);
    for (size_t i = 0; i < data->size(); ++i)
      if (auto err = data->load(i, source))
        return err;
    if (auto err = source.end_object())
      return err;
    msg = caf::message{caf::message::data_ptr{std::move(data)}};
    return caf::none;
  }
  caf::detail::dynamic_message_data::elements values;
  values.reserve(sig->prototypes.size());
  for (const auto& proto : sig->prototypes) {
    values.emplace_back(proto->copy());
    if (auto err = values.back()->load(source))
      return err;
  }
  if (auto err = source.end_object())
    return err;
  msg = caf::message{caf::message::data_ptr{
      caf::make_counted<caf::detail::dynamic_message_data>(std::move(values))}};
  return caf::none;
}

/// Loads a message straight from its bytes (direct_codec.hpp) when its
/// type list is one `signatures` keeps, written short, of elements that
/// all have a direct kind, and every byte is in the form CAF writes;
/// null otherwise (nothing decided: the general load reads it again).
caf::intrusive_ptr<loaded_message_data>
load_direct_message(const uint8_t* data, size_t len,
                    const message_signatures& signatures,
                    size_t companion_bytes) {
  size_t header = 0;
  const auto* sig = find_short_list(data, len, signatures, header);
  if (sig == nullptr || !sig->layout.all_direct
      || sig->layout.slots.size() != sig->prototypes.size())
    return nullptr;
  auto msg = loaded_message_data::make(sig->layout, sig->prototypes,
                                       companion_bytes);
  const uint8_t* pos = data + header;
  const uint8_t* end = data + len;
  for (size_t i = 0; i < msg->size() && pos != nullptr; ++i)
    pos = load_direct(sig->layout.slots[i].direct, msg->get_mutable(i), pos,
                      end);
  if (pos != end)
    return nullptr;
  return msg;
}

/// Refuses values that CAF loads without complaint but cannot handle
/// afterwards, in `msg` and in the context of every error in it: a
/// caf::duration whose unit is none of caf::time_unit's, which CAF's
/// to_string looks up in a table, out of bounds (a crash found by
/// rdmactor_fuzz_actor_codec; CAF's default handler prints every message
/// an actor does not handle), also in the messages of a
/// std::vector<caf::message>.  Durations inside the application's own
/// types are not seen here (docs/security.md).  Also refuses a nest
/// deeper than max_message_nesting as CAF would write it again (CAF
/// writes a context object for an empty error, which the peer's bytes
/// need not have had), so that what was accepted can be forwarded to
/// another node.
caf::error check_loaded_values(const caf::message& msg, int level = 1) {
  for (size_t i = 0; i < msg.size(); ++i) {
    if (msg.match_element<caf::duration>(i)) {
      auto unit = msg.get_as<caf::duration>(i).unit;
      if (static_cast<uint32_t>(unit)
          > static_cast<uint32_t>(caf::time_unit::nanoseconds))
        return make_error(errc::serialization_failed,
                          "the peer sent a caf::duration with the unknown "
                          "unit "
                              + std::to_string(static_cast<uint32_t>(unit)));
    } else if (msg.match_element<caf::error>(i)) {
      // CAF writes a context for every error, an empty one (code 0)
      // included, whose context cannot be looked at.
      const auto& nested = msg.get_as<caf::error>(i);
      if (level + 1 > max_message_nesting)
        return make_error(errc::serialization_failed, nested_too_deep());
      if (nested)
        if (auto err = check_loaded_values(nested.context(), level + 1))
          return err;
    } else if (msg.match_element<std::vector<caf::message>>(i)) {
      // CAF registers std::vector<caf::message> itself: messages in it
      // are checked like the others (a duration of an unknown unit in an
      // error in one crashed CAF's to_string: rdmactor_fuzz_actor_codec).
      if (level + 1 > max_message_nesting)
        return make_error(errc::serialization_failed, nested_too_deep());
      for (const auto& inner : msg.get_as<std::vector<caf::message>>(i))
        if (auto err = check_loaded_values(inner, level + 1))
          return err;
    }
  }
  return caf::none;
}

/// The C++ name of a message element's type, for errors ("?" without
/// one).
std::string cxx_type_name(const std::type_info* ti) {
  if (ti == nullptr)
    return "?";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled{
      abi::__cxa_demangle(ti->name(), nullptr, nullptr, &status), std::free};
  return status == 0 && demangled ? std::string{demangled.get()}
                                  : std::string{ti->name()};
}

} // namespace

caf::error check_not_system_message(const caf::type_erased_tuple& msg,
                                    bool peer) {
  const char* who = peer ? "the peer sent " : "cannot send ";
  if (msg.match_elements<caf::error>())
    return make_error(errc::serialization_failed,
                      std::string{who}
                          + "a message that holds only a caf::error, which "
                            "CAF hands to the receiver's error handler (its "
                            "default makes the actor quit); only a response "
                            "may be a lone error"
                          + (peer ? "" : ": add an atom or another element"));
  if (!msg.empty() && msg.match_element<caf::atom_value>(0)
      && msg.get_as<caf::atom_value>(0) == caf::sys_atom::value)
    return make_error(errc::serialization_failed,
                      std::string{who}
                          + "a message that starts with sys_atom, which CAF "
                            "takes as a system query, not a message for the "
                            "actor");
  return caf::none;
}

caf::error check_not_system_message(const caf::message& msg, bool peer) {
  if (msg.empty())
    return caf::none;
  return check_not_system_message(msg.content(), peer);
}

bool banned_type_name(const std::string& name) {
  // Actor handles travel (remote_actors resolves them into proxies);
  // these do not.
  // Called for every object of every message: lengths first, no strlen.
  static constexpr std::string_view banned[] = {
      "@down",    "@downstream_msg",  "@exit",    "@group",       "@group_down",
      "@message", "@open_stream_msg", "@timeout", "@upstream_msg"};
  if (name.size() < 5 || name[0] != '@')
    return false;
  for (auto b : banned)
    if (name.size() == b.size() && name.compare(0, b.size(), b) == 0)
      return true;
  return false;
}

caf::expected<const std::vector<char>*>
serialize_to_scratch(caf::actor_system& sys, const caf::type_erased_tuple& msg,
                     bool* node_ids, bool keep_types) {
  // Most messages of a thread are alike: a buffer that keeps its capacity
  // saves the vector's regrowth (a copy per doubling, fresh pages each
  // time) on every large message.
  constexpr size_t keep_bytes = size_t{1} << 20;
  thread_local std::vector<char> scratch;
  if (scratch.capacity() > keep_bytes)
    std::vector<char>{}.swap(scratch);
  scratch.clear();
  auto res = serialize_message_into(sys, msg, scratch, node_ids, keep_types);
  if (res)
    return res;
  return &scratch;
}

caf::expected<const std::vector<char>*>
serialize_to_scratch(caf::actor_system& sys, const caf::message& msg,
                     bool* node_ids, bool keep_types) {
  caf::empty_type_erased_tuple none;
  return serialize_to_scratch(sys, msg.empty() ? none : msg.content(), node_ids,
                              keep_types);
}

caf::expected<std::vector<char>> serialize_message(caf::actor_system& sys,
                                                   const caf::message& msg) {
  std::vector<char> buf;
  auto res = serialize_message_into(sys, msg, buf);
  if (res)
    return res;
  return buf;
}

namespace {

/// A type list this thread wrote for a system (by its node id): the
/// elements' CAF types and the names CAF writes for them, all checked, and
/// the bytes CAF's begin_object writes for a list under 128 bytes (type
/// number 0 in two bytes, a one-byte length, the names; empty for a
/// longer list).
struct written_list {
  caf::node_id node;
  std::vector<caf::rtti_pair> types;
  std::string names;
  std::string header;
  /// Each element's direct kind; `all_direct`: none is `none`.
  std::vector<direct_kind> kinds;
  bool all_direct = false;
};

/// The last type lists this thread wrote (a sender writes few kinds).
struct written_lists {
  static constexpr size_t capacity = 8;
  std::array<written_list, capacity> lists;
  size_t next = 0;

  /// Returns `msg`'s type list when kept for `node`, or null.
  const written_list* find(const caf::node_id& node,
                           const caf::type_erased_tuple& msg) const {
    for (const auto& e : lists) {
      if (e.types.size() != msg.size() || e.types.empty() || e.node != node)
        continue;
      size_t i = 0;
      while (i < e.types.size() && e.types[i] == msg.type(i))
        ++i;
      if (i == e.types.size())
        return &e;
    }
    return nullptr;
  }

  void keep(const caf::node_id& node, const caf::type_erased_tuple& msg,
            const std::string& names) {
    if (msg.size() > message_signatures::max_elements)
      return;
    auto& e = lists[next];
    next = (next + 1) % capacity;
    e.node = node;
    e.types.clear();
    e.kinds.clear();
    e.all_direct = true;
    for (size_t i = 0; i < msg.size(); ++i) {
      e.types.push_back(msg.type(i));
      e.kinds.push_back(direct_kind_of(msg.type(i)));
      e.all_direct = e.all_direct && e.kinds.back() != direct_kind::none;
    }
    e.names = names;
    e.header.clear();
    if (names.size() < 0x80) {
      e.header.append(2, '\0');
      e.header.push_back(static_cast<char>(names.size()));
      e.header += names;
    }
  }
};

/// Writes the elements of `msg` and the end of its object (CAF 0.17's
/// message::save after the type list).
caf::error save_elements(caf::serializer& sink,
                         const caf::type_erased_tuple& msg) {
  for (size_t i = 0; i < msg.size(); ++i)
    if (auto err = msg.save(i, sink))
      return err;
  return sink.end_object();
}

/// Writes `msg` as CAF 0.17's message::save does (an object named by its
/// type list `names`, its elements, the end of the object).
caf::error save_message(caf::serializer& sink,
                        const caf::type_erased_tuple& msg, std::string& names) {
  uint16_t zero = 0;
  if (auto err = sink.begin_object(zero, names))
    return err;
  return save_elements(sink, msg);
}

} // namespace

caf::error serialize_message_into(caf::actor_system& sys,
                                  const caf::type_erased_tuple& msg,
                                  std::vector<char>& buf, bool* node_ids,
                                  bool keep_types) {
  // The type list CAF writes: "@<>+name+name...", each name checked once
  // per thread and system when `keep_types`.
  thread_local std::string names;
  thread_local written_lists written;
  const written_list* kept
      = keep_types && !msg.empty() ? written.find(sys.node(), msg) : nullptr;
  if (kept == nullptr) {
    auto& types = sys.types();
    names = "@<>";
    for (size_t i = 0; i < msg.size(); ++i) {
      const auto& name = types.portable_name(msg.type(i));
      if (name == types.default_type_name())
        return make_error(errc::serialization_failed,
                          "element " + std::to_string(i) + " of the message ("
                              + cxx_type_name(msg.type(i).second)
                              + ") has a type not registered in the "
                                "actor_system_config (add_message_type)");
      if (banned_type_name(name))
        return make_error(errc::serialization_failed,
                          "element " + std::to_string(i) + " is a " + name
                              + ", which cannot travel between nodes: groups, "
                                "system messages and nested messages stay on "
                                "their node");
      names += '+';
      names += name;
    }
    if (keep_types && !msg.empty())
      written.keep(sys.node(), msg, names);
  }
  // A kept list under 128 bytes goes as the bytes begin_object writes;
  // elements that all have a direct kind go as direct_codec writes them.
  if (kept != nullptr && !kept->header.empty() && kept->all_direct) {
    // Sized first, then written in place: one resize per message.
    size_t total = kept->header.size();
    for (size_t i = 0; i < msg.size() && total > 0; ++i) {
      auto n = direct_size(kept->kinds[i], msg.get(i));
      total = n > 0 ? total + n : 0; // 0: too long, the general way says so
    }
    if (total > 0) {
      auto mark = buf.size();
      buf.resize(mark + total);
      char* out = buf.data() + mark;
      std::memcpy(out, kept->header.data(), kept->header.size());
      out += kept->header.size();
      for (size_t i = 0; i < msg.size(); ++i)
        out = write_direct(kept->kinds[i], msg.get(i), out);
      if (node_ids != nullptr)
        *node_ids = false; // no actor handle among them
      return caf::none;
    }
  }
  try {
    const bool as_bytes = kept != nullptr && !kept->header.empty();
    if (as_bytes)
      buf.insert(buf.end(), kept->header.begin(), kept->header.end());
    else if (kept != nullptr)
      names = kept->names;
    finite_serializer sink{sys, buf};
    caf::message none; // CAF's own encoding of an empty message
    auto err = msg.empty() ? sink(none)
               : as_bytes  ? save_elements(sink, msg)
                           : save_message(sink, msg, names);
    if (node_ids != nullptr)
      *node_ids = sink.node_ids();
    if (sink.refusal())
      return sink.refusal();
    if (err)
      return make_error(errc::serialization_failed,
                        "serializing the message failed: " + sys.render(err));
  } catch (const std::exception& e) {
    return make_error(errc::serialization_failed,
                      std::string{"serializing the message threw: "}
                          + e.what());
  }
  return caf::none;
}

caf::error serialize_message_into(caf::actor_system& sys,
                                  const caf::message& msg,
                                  std::vector<char>& buf, bool* node_ids,
                                  bool keep_types) {
  caf::empty_type_erased_tuple none;
  return serialize_message_into(sys, msg.empty() ? none : msg.content(), buf,
                                node_ids, keep_types);
}

caf::expected<caf::message>
deserialize_message(caf::actor_system& sys, const uint8_t* data, size_t len,
                    bool* node_ids, caf::execution_unit* ctx,
                    message_signatures* signatures, size_t companion_bytes) {
  caf::message msg;
  // (Made only when the caller keeps none: an empty std::optional of the
  // table cost about a hundred instructions per message.)
  std::unique_ptr<message_signatures> own;
  if (signatures == nullptr) {
    own = std::make_unique<message_signatures>();
    signatures = own.get();
  } else if (auto direct
             = load_direct_message(data, len, *signatures, companion_bytes)) {
    // Numbers, strings and byte vectors: no actor handle, nothing that
    // check_loaded_values looks at.
    if (node_ids != nullptr)
      *node_ids = false;
    return caf::message{caf::message::data_ptr{std::move(direct)}};
  }
  try {
    std::optional<bounded_deserializer> holder;
    if (ctx != nullptr)
      holder.emplace(ctx, data, len);
    else
      holder.emplace(sys, data, len);
    auto& source = *holder;
    bool checked = true;
    auto err
        = load_message(source, sys, *signatures, msg, checked, companion_bytes);
    if (node_ids != nullptr)
      *node_ids = source.node_ids();
    if (source.refusal())
      return source.refusal();
    if (err) {
      return make_error(errc::serialization_failed,
                        "the peer's message does not deserialize here ("
                            + sys.render(err)
                            + "): are its types registered on both sides "
                              "with the same names and layouts?");
    }
    if (source.remaining() != 0)
      return make_error(errc::serialization_failed,
                        std::to_string(source.remaining())
                            + " bytes left over after the peer's message: "
                              "its types differ from ours");
    if (checked)
      if (auto bad = check_loaded_values(msg))
        return bad;
    // CAF's message loading can end with an empty message and no error on
    // some malformed inputs: an empty message is taken only in its one
    // exact encoding.
    if (msg.empty()) {
      static const auto empty = serialize_message(sys, caf::message{});
      if (!empty || empty->size() != len
          || std::memcmp(empty->data(), data, len) != 0)
        return make_error(errc::serialization_failed,
                          "the peer's message does not deserialize here "
                          "(malformed bytes)");
    }
  } catch (const std::exception& e) {
    return make_error(errc::serialization_failed,
                      std::string{"deserializing the peer's message threw: "}
                          + e.what());
  }
  return msg;
}

} // namespace rdmactor
