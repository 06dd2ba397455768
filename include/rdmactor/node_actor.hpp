#pragma once

#include <cstdint>
#include <string>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "rdmactor/allocator.hpp"
#include "rdmactor/atoms.hpp"
#include "rdmactor/connection.hpp"
#include "rdmactor/options.hpp"

namespace rdmactor {

/// What a listening node actor hands each accepted peer to:
/// `(accepted_atom, connection_actor)`.  Keep the handle, or the connection
/// closes (it ends when its last handle goes).
using acceptor_actor
    = caf::typed_actor<caf::reacts_to<accepted_atom, connection_actor>>;

/// The node as an actor: the asynchronous interface for code that runs
/// inside actors.  Nothing it does blocks a CAF worker: connecting and
/// closing, which wait for the network or for threads, run on a thread of
/// their own (a blocking helper actor per call) and answer through a
/// response promise.
///
/// - `(connect_atom, "HOST:PORT") -> connection_actor`: within
///   connect_timeout_ms; errors as `node::connect` (`connect_failed`,
///   `connect_timeout`, `invalid_address`, `closed` once the node closes).
///   Several connects run at once, each on its own helper thread.
/// - `(listen_atom, "HOST:PORT", acceptor_actor) -> port`: the bound port
///   (port 0: any free one); each accepted peer goes to the acceptor.
/// - `(stats_atom) -> allocator_stats`: the node's memory accounting.
/// - `(close_atom) -> bool`: stops listening, tells every connection of the
///   node to quit and the allocator to stop, then answers true (false when
///   the node was closed already) and the node actor quits.  Pending
///   connects fail with `closed`.
///
/// Lifetime: the node lives as long as its actor.  When the last handle
/// goes or the actor is killed, the node closes as with `close_atom` (in
/// the terminating thread: it stops the acceptor threads, which wake at
/// once).  Drop or close the node actor before the actor system ends, as
/// with any actor that holds resources; its connections end with it.
using node_actor = caf::typed_actor<
    caf::replies_to<connect_atom, std::string>::with<connection_actor>,
    caf::replies_to<listen_atom, std::string, acceptor_actor>::with<uint16_t>,
    caf::replies_to<stats_atom>::with<allocator_stats>,
    caf::replies_to<close_atom>::with<bool>>;

/// Opens the fabric that `opts` names (as `node::open`, which does not wait
/// for the network) and spawns the node's actor.  Errors as `node::open`.
/// Caller: any thread, also an actor.
caf::expected<node_actor> spawn_node(caf::actor_system& sys, options opts);

} // namespace rdmactor
