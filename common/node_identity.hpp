#pragma once

// The CAF node id of an actor system that runs rdmactor nodes.  Not
// installed.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <caf/actor_control_block.hpp>
#include <caf/actor_system.hpp>
#include <caf/node_id.hpp>

namespace rdmactor {

/// The 20 random bytes of a node id's host part.
using node_secret
    = std::array<uint8_t, caf::node_id::default_data::host_id_size>;

/// Gives `sys` a node id of its own (the process id and 20 random bytes)
/// when it has none: CAF 0.17 leaves it invalid unless caf::io's
/// middleman runs, and with an invalid node id CAF takes every actor
/// handle a peer sends for one of this system's actors and looks its id up
/// in the local registry.  Called by `system_hook`'s constructor, before
/// the system spawns any actor (every actor keeps the node id of its
/// spawn).
void assign_node_id(caf::actor_system& sys);

/// The host part of `sys`'s node id; none while it is invalid.
std::optional<node_secret> secret_of(const caf::actor_system& sys);

/// Whether `len` bytes at `data` hold `secret`: CAF's binary format writes
/// the node id of every actor handle it serializes, so the bytes of a
/// message that hold a handle of one of our actors (or of a proxy) hold
/// our node's secret.
bool holds_secret(const node_secret& secret, const char* data, size_t len);

/// The actor ids of the handles of our node that CAF's serializer wrote
/// into `len` bytes at `data`: each handle is the actor id (8 bytes,
/// big-endian), CAF's "default" node id tag (8), the process id (4) and
/// the secret (20).  Any thread.
std::vector<uint64_t> serialized_local_ids(const node_secret& secret,
                                           const char* data, size_t len);

/// Counts a connection's hold on the actors `ids` of `sys` whose handles it
/// sent (CAF's serializer put them in the actor registry, which keeps them
/// alive for the peer, as caf::io does) and returns those still there.
/// Any thread.
std::vector<caf::strong_actor_ptr>
hold_handed(caf::actor_system& sys, const std::vector<uint64_t>& ids);

/// Ends a connection's hold on `ids` (its end, or the actor's): an actor
/// no connection holds leaves the registry, so that it can go (an actor
/// kept there forever would keep ~actor_system waiting).  Any thread.
void release_handed(caf::actor_system& sys, const std::vector<uint64_t>& ids);

/// Takes the actors `ids` whose handles CAF's serializer wrote into a
/// message that will not be sent out of `sys`'s actor registry again: CAF
/// 0.17 registers every actor of this node whose handle it serializes,
/// with a strong reference, so that a peer could find it, which would keep
/// the actor alive until it quits on its own.  Actors a connection holds
/// (hold_handed) stay.  Any thread.
void unregister_serialized(caf::actor_system& sys,
                           const std::vector<uint64_t>& ids);

} // namespace rdmactor
