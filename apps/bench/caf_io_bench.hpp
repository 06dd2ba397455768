#pragma once

#include <cstdint>
#include <string>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "apps/bench/forked_server.hpp"
#include "apps/bench/run_channel.hpp"
#include "apps/bench/run_spec.hpp"

/// The CAF io baseline: the same patterns between two actor systems
/// connected by `caf::io` remote actors (BASP over TCP), payload a
/// `std::vector<uint8_t>`.
namespace rdmactor::bench::caf_io {

/// `(ping_atom, bytes) -> bytes`: the server echoes the vector.
using ping_atom = caf::atom_constant<caf::atom("ping")>;
/// `(push_atom, bytes) -> uint64_t`: the server answers the byte count.
using push_atom = caf::atom_constant<caf::atom("push")>;
/// `(pull_atom, n) -> bytes`: the server answers n bytes (at most its
/// max_pull_bytes, else `errc::quota_exceeded`).
using pull_atom = caf::atom_constant<caf::atom("pull")>;

/// Registers the message types of the baseline; call before the actor
/// system is constructed.
void add_message_types(caf::actor_system_config& cfg);

/// Spawns the server actor (publish it with `caf::io::publish`); it
/// allocates at most `max_pull_bytes` for one pull, the size a client names.
caf::actor spawn_server(caf::actor_system& sys, uint64_t max_pull_bytes);

/// Spawns the driver of one run against the (remote) server.
///
/// send lat: ping-pong of `spec.size` bytes, a sample is half the round
/// trip.  send bw and write: a window of pushes, each answered with the
/// byte count (the counterpart of send_data's acknowledgment and of a
/// write's completion).  read: pulls of `spec.size` bytes.  write/read lat:
/// one at a time, a sample is the completion time.  raw has no
/// counterpart and fails.
caf::actor spawn_driver(caf::actor_system& sys, caf::actor server,
                        run_spec spec, run_channel_ptr chan);

/// Forks a child that publishes a server on 127.0.0.1 (any port) with an
/// actor system built from `cfg`, reports the port and serves until
/// `stop_forked_server`.  Call before this process creates threads.
/// `max_pull_bytes`: see spawn_server.
caf::expected<forked_server> fork_server(caf::actor_system_config& cfg,
                                         uint64_t max_pull_bytes);

} // namespace rdmactor::bench::caf_io
