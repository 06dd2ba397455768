#pragma once

#include <caf/actor_addr.hpp>

#include "apps/bench/run_progress.hpp"
#include "rdmactor/data_handler.hpp"
#include "rdmactor/remote_mr.hpp"

namespace rdmactor::bench {

/// Whether `spec` runs in a data handler inside the client's connection
/// (rdmactor/data_handler.hpp) instead of from the driver actor: send,
/// write and read, lat and bw, unless `--actor-driver`.  perftest's loops
/// own their queue pair the same way.
bool runs_in_handler(const run_spec& spec);

/// Returns the handler that runs `run` (runs_in_handler) once subscribed
/// on the connection, owning the run's bookkeeping from then on (used by
/// the connection's activations alone):
/// - send: each echo completes a round trip and sends the next ping
///   (`local`) from the activation that read it.  The first ping is counted
///   now; the driver sends it after subscribing (a handler sends only when
///   called).
/// - write, read, send bw: `on_attach` issues the first operations on
///   `local` (and `remote`), the window's worth (1 in lat mode), and each
///   completion the next.
/// It ends the driver (an exit to `driver`) when the run is done, and
/// fails the run when it is detached first (the connection's end).
data_handler_ptr make_loop_handler(run_progress run, local_mr local,
                                   remote_mr remote, caf::actor_addr driver);

} // namespace rdmactor::bench
