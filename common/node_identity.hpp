#pragma once

// The CAF node id of an actor system that runs rdmactor nodes.  Not
// installed.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

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

/// Takes the handles of our actors that CAF's serializer wrote into `len`
/// bytes at `data` (a message that will not be sent) out of `sys`'s actor
/// registry again: CAF 0.17 registers every actor of this node whose handle
/// it serializes, with a strong reference, so that a peer could find it,
/// which would keep the actor alive until it quits on its own.  Each handle
/// is the actor id (8 bytes, big-endian), CAF's "default" node id tag (8),
/// the process id (4) and the secret (20).
void unregister_serialized(caf::actor_system& sys, const node_secret& secret,
                           const char* data, size_t len);

} // namespace rdmactor
