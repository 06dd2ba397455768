#pragma once

// Internal to remote actors: the element factories of the message type
// lists ("signatures") a connection received last, so that loading a
// peer's message does not look up every element's type by name.  Not
// installed.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <caf/type_erased_value.hpp>
#include <caf/uniform_type_info_map.hpp>

#include "actors/remote/loaded_message.hpp"

namespace rdmactor {

/// One type list of a message as CAF writes it ("@<>+@atom+@u64+point"):
/// a default value of each element's type to copy from, the layout of a
/// message of these elements, and whether an
/// element needs actor_codec's checks after loading (a caf::duration, a
/// caf::error or a std::vector<caf::message>).
struct message_signature {
  std::string names;
  std::vector<caf::type_erased_value_ptr> prototypes;
  /// Where a loaded message of this list keeps each element
  /// (loaded_message_data).
  message_layout layout;
  bool checked_after_load = false;
};

/// The signatures a connection's messages used last, a few at a time,
/// replaced round-robin.  Not thread-safe: each connection's agent owns
/// one (remote_actors' deliver runs on the agent's thread).  The peer
/// chooses the names, so the cache is bounded in entries and in elements
/// per entry; a message past either bound still loads, without the cache.
class message_signatures {
public:
  /// Entries kept.
  static constexpr size_t capacity = 8;

  /// Elements of the longest signature kept (an honest message has a few;
  /// the peer's names must not make the cache large).
  static constexpr size_t max_elements = 16;

  /// Returns the cached signature named `names` or null.
  const message_signature* find(std::string_view names) const noexcept;

  /// Makes the signature named `names` ("@<>+name+name...") with `types`'
  /// factories and keeps it when it has at most max_elements.  Fills
  /// `unknown` with the first name `types` does not know (and returns
  /// null); `scratch` takes a signature too long to keep.
  const message_signature* make(const caf::uniform_type_info_map& types,
                                const std::string& names, std::string& unknown,
                                message_signature& scratch);

  /// Signatures made since construction (misses; for tests).
  size_t made() const noexcept {
    return made_;
  }

private:
  std::array<message_signature, capacity> entries_;
  size_t next_ = 0;
  size_t made_ = 0;
};

} // namespace rdmactor
