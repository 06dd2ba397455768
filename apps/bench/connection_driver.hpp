#pragma once

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "apps/bench/run_channel.hpp"
#include "apps/bench/run_spec.hpp"
#include "rdmactor/connection.hpp"

namespace rdmactor::bench {

/// Spawns the driver of one `send`, `write` or `read` run on `conn`.
///
/// The driver is an event-based actor that issues every operation with
/// `request(...).then(...)` (no blocking round trip per operation).  It sets
/// up its memory first (a local_mr from the connection, plus a remote_mr
/// from the peer for write and read), then runs `spec.warmup` operations
/// followed by `spec.iters` measured ones, bumps `chan` per completed
/// operation and delivers the outcome to `chan` once; it then quits.
///
/// send, lat: ping-pong.  The driver sends `spec.size` bytes flagged
/// `echo_flag` and waits until the bench server echoed every chunk; a
/// sample is half the round trip.  send, bw: a window of send_data
/// requests flagged `sink_flag`; an operation completes when the peer
/// acknowledged it.  write/read: one operation at a time (lat: a sample is
/// its completion time) or a window of them (bw).
///
/// `plain`: spawned with CAF's spawn, else (the bench's default) with
/// rdmactor::spawn_with_scheduler_job, as docs/data-handlers.md recommends for
/// an actor that calls a connection in a loop.
caf::actor spawn_connection_driver(caf::actor_system& sys,
                                   connection_actor conn, run_spec spec,
                                   run_channel_ptr chan, bool plain);

} // namespace rdmactor::bench
