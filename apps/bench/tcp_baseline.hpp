#pragma once

#include <cstdint>
#include <string>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "apps/bench/forked_server.hpp"
#include "apps/bench/run_channel.hpp"
#include "apps/bench/run_spec.hpp"

/// The medium as a baseline: the bench's patterns over one plain TCP
/// connection between two processes (TCP_NODELAY, one `writev` per
/// message), without CAF or rdmactor in the path, so that a table shows
/// what the loopback itself carries.
///
/// A message is a 5-byte header (payload length, little-endian 32 bits,
/// then a kind byte) and its payload.  The server answers a ping with
/// the same message and a push with the 8-byte count of its payload; it
/// reads as much as the socket holds and answers every complete message
/// of one read with one write.
namespace rdmactor::bench::tcp {

/// Serves baseline connections on the listening socket `listen_fd`, one
/// at a time, until `stop_fd` becomes readable (or reads end of file).
/// Returns 0, or 1 after a socket error other than a peer that went.
int serve(int listen_fd, int stop_fd);

/// Opens a listening TCP socket on `host`:`port` (port 0: any); returns
/// the socket and writes the port to `bound_port`.
caf::expected<int> listen_on(const std::string& host, uint16_t port,
                             uint16_t& bound_port);

/// Forks a child that serves on 127.0.0.1 (any port) until
/// `stop_forked_server`.  Call before this process creates threads.
caf::expected<forked_server> fork_server();

/// Spawns the driver of one run against the server at `host`:`port`: a
/// detached actor that opens its own connection and blocks on it.
///
/// send lat: ping-pong of `spec.size` bytes, a sample is half the round
/// trip.  send bw: a window of `spec.window` pushes, each answered with its
/// byte count.  Other operations have no counterpart and fail.
caf::actor spawn_driver(caf::actor_system& sys, std::string host, uint16_t port,
                        run_spec spec, run_channel_ptr chan);

} // namespace rdmactor::bench::tcp
