#pragma once

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "rdmactor/connection.hpp"

namespace rdmactor::bench {

/// Spawns the server side of one connection: it subscribes to the
/// connection's data (every chunk is pushed to it, as CAF io pushes
/// messages to its sink), echoes every chunk whose first byte is
/// `echo_flag` (zero copy: it sends the received buffer back) and drops
/// the others.  It quits when the connection goes.
/// `plain`: CAF's spawn, else rdmactor::spawn_with_scheduler_job.
caf::actor spawn_bench_server(caf::actor_system& sys, connection_actor conn,
                              bool plain);

/// Spawns an actor that handles `(accepted_atom, connection_actor)` from
/// `node::listen` by spawning a bench server for the connection.
/// `plain`: how the servers are spawned (see spawn_bench_server).
caf::actor spawn_bench_acceptor(caf::actor_system& sys, bool plain);

/// Returns the number of bench servers alive in this process (one per
/// connection being served).  Any thread.
uint64_t live_bench_servers() noexcept;

} // namespace rdmactor::bench
