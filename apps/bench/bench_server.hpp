#pragma once

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "rdmactor/connection.hpp"

namespace rdmactor::bench {

/// Spawns the server side of one connection: it echoes every chunk whose
/// first byte is `echo_flag` (zero copy: it sends the received buffer
/// back) and drops the others, and quits when the connection goes.  The
/// echo is a data handler (rdmactor/data_handler.hpp: inside the agent's
/// activation, the way to serve requests docs/data-handlers.md recommends), or
/// with `actor_echo` this actor as the connection's data_subscriber (every
/// chunk pushed to it, as CAF io pushes messages to its sink).
/// `plain`: CAF's spawn, else rdmactor::spawn_with_scheduler_job.
caf::actor spawn_bench_server(caf::actor_system& sys, connection_actor conn,
                              bool plain, bool actor_echo);

/// Spawns an actor that handles `(accepted_atom, connection_actor)` from
/// `node::listen` by spawning a bench server for the connection.
/// `plain`, `actor_echo`: how the servers run (see spawn_bench_server).
caf::actor spawn_bench_acceptor(caf::actor_system& sys, bool plain,
                                bool actor_echo);

/// Returns the number of bench servers alive in this process (one per
/// connection being served).  Any thread.
uint64_t live_bench_servers() noexcept;

} // namespace rdmactor::bench
