#pragma once

// Internal to remote actors: CAF messages to bytes and back with CAF's own
// binary format, checked for what must not cross a connection.  Not
// installed.

#include <cstddef>
#include <cstdint>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>
#include <caf/message.hpp>
#include <caf/type_erased_tuple.hpp>

#include "actors/remote/message_signatures.hpp"

namespace rdmactor {

/// Serializes `msg` with caf::binary_serializer.  Fails with
/// `serialization_failed` when an element's type is not registered in the
/// actor system's config (`add_message_type`) or is one that cannot travel
/// (groups, down and exit messages, nested messages, streams; actor
/// handles travel, see remote_actors), or when it holds a floating-point value
/// that is not finite (CAF 0.17's format loops forever on an infinity).  Called
/// by a remote-actor proxy on the sender's thread.
caf::expected<std::vector<char>> serialize_message(caf::actor_system& sys,
                                                   const caf::message& msg);

/// The same, appending to `buf`; an error leaves `buf` partly written.
/// With `node_ids`, sets it to whether a node id (of an actor handle) may
/// be among the bytes.  With `keep_types`, the calling thread keeps the
/// message's checked type list (its last 8, by the system's node id), so
/// the next message of the same types is not looked up by name: only for
/// a system whose node id is its own (rdmactor's system_hook gives it 20
/// random bytes), since a system made later at the same address must not
/// find the lists of one that ended.
caf::error serialize_message_into(caf::actor_system& sys,
                                  const caf::message& msg,
                                  std::vector<char>& buf,
                                  bool* node_ids = nullptr,
                                  bool keep_types = false);

/// The same for a message's content, e.g. a mailbox element's (no message
/// made of it first).
caf::error serialize_message_into(caf::actor_system& sys,
                                  const caf::type_erased_tuple& msg,
                                  std::vector<char>& buf,
                                  bool* node_ids = nullptr,
                                  bool keep_types = false);

/// The same into the calling thread's scratch buffer, whose capacity is
/// kept between calls (up to 1 MiB): no allocation and no regrowth once
/// warm.  The bytes stay valid until the next call on this thread.
/// Called by a remote-actor proxy on the sender's thread, which copies
/// them once to where they travel from (registered memory or the outbox).
caf::expected<const std::vector<char>*>
serialize_to_scratch(caf::actor_system& sys, const caf::message& msg,
                     bool* node_ids = nullptr, bool keep_types = false);

/// The same for a message's content: a proxy serializes its mailbox
/// element's content where it is, without moving it into a message.
caf::expected<const std::vector<char>*>
serialize_to_scratch(caf::actor_system& sys, const caf::type_erased_tuple& msg,
                     bool* node_ids = nullptr, bool keep_types = false);

/// Deserializes what `serialize_message` wrote; never trusts the bytes:
/// every sequence length is checked against the bytes left before anything
/// is allocated for it, the types must be registered here and travel
/// (see serialize_message), floating-point values must be finite, every
/// byte must be consumed, and exceptions
/// thrown by user inspect functions become errors.  Fails with
/// `serialization_failed` naming the cause.  Called by the agent for each
/// complete actor message from the peer.
/// With `node_ids`, sets it to whether a node id (of an actor handle) may
/// be among the bytes.  Actor handles load through `ctx`'s proxy registry
/// (remote_actors' resolver); without `ctx` a handle of another node fails
/// to load (`serialization_failed`).  With `signatures` (a connection's,
/// used on one thread at a time) the message's type list is looked up
/// there before CAF's type table, and kept there.  With `companion_bytes`,
/// a message that loads into one block (loaded_message_data) has room for
/// an object of that size in it (take_companion).
caf::expected<caf::message> deserialize_message(
    caf::actor_system& sys, const uint8_t* data, size_t len,
    bool* node_ids = nullptr, caf::execution_unit* ctx = nullptr,
    message_signatures* signatures = nullptr, size_t companion_bytes = 0);

/// Refuses `msg` as an ordinary message or request (not a response) when
/// CAF would take it as a system message instead of handing it to the
/// actor's behavior: a lone caf::error (CAF's error handler, whose default
/// makes the actor quit) or a message that starts with `sys_atom` (CAF's
/// system queries).  Down, exit, timeout and stream messages cannot travel
/// at all (banned_type_name).  A response may be a lone error: that is how
/// a request fails.  Fails with `serialization_failed` naming the kind;
/// `peer` tells whether the message came from the peer (the receiving
/// node) or from a local actor (the sending node).
caf::error check_not_system_message(const caf::message& msg, bool peer);

/// The same for a message's content.
caf::error check_not_system_message(const caf::type_erased_tuple& msg,
                                    bool peer);

/// Returns whether the type with CAF's portable name `name` must not cross
/// a connection (it carries actor handles or runtime internals).
bool banned_type_name(const std::string& name);

} // namespace rdmactor
