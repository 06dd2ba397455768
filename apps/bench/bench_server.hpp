#pragma once

#include <chrono>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "rdmactor/connection.hpp"

namespace rdmactor::bench {

/// How bench servers run.
struct server_options {
  /// CAF's spawn, else rdmactor::spawn_with_scheduler_job.
  bool plain = false;
  /// Echo from the server actor as the connection's data_subscriber, else
  /// from a data handler.
  bool actor_echo = false;
  /// CAF timeout of a server's requests to its connection (`--timeout-ms`).
  std::chrono::milliseconds timeout{30000};
};

/// Spawns the server side of one connection: it echoes every chunk whose
/// first byte is `echo_flag` (zero copy: it sends the received buffer
/// back) and drops the others, and quits when the connection goes.  The
/// echo is a data handler (rdmactor/data_handler.hpp: inside the agent's
/// activation, the way to serve requests docs/data-handlers.md recommends), or
/// with `actor_echo` this actor as the connection's data_subscriber (every
/// chunk pushed to it, as CAF io pushes messages to its sink).
/// Whoever spawns it keeps a reference for as long as the connection
/// lives (the acceptor does): with a data handler nothing else does.
caf::actor spawn_bench_server(caf::actor_system& sys, connection_actor conn,
                              server_options how);

/// Spawns an actor that handles `(accepted_atom, connection_actor)` from
/// `node::listen` by spawning a bench server for the connection, and holds
/// each server until it quits (when its connection goes).
caf::actor spawn_bench_acceptor(caf::actor_system& sys, server_options how);

/// Returns the number of bench servers alive in this process (one per
/// connection being served).  Any thread.
uint64_t live_bench_servers() noexcept;

} // namespace rdmactor::bench
