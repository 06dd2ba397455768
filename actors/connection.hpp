#pragma once

#include <cstdint>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/agent.hpp"
#include "actors/allocator.hpp"

namespace rdmactor {

/// The connection actor: the typed interface users call, one per peer.
///
/// Every request is answered with a value or a `caf::error` (category
/// `rdmactor`) within request_timeout_ms; use `request(conn, timeout, ...)`
/// with a timeout of your own as well.
///
/// - `(alloc_local_mr_atom, size, align) -> local_mr`: registered local
///   memory with every access right (from the node's allocator).
/// - `(request_remote_mr_atom, size, align) -> remote_mr`: the peer
///   allocates memory for us.
/// - `(send_mr_atom, local_mr | remote_mr) -> mr_token`,
///   `(receive_local_mr_atom) -> local_mr`,
///   `(receive_remote_mr_atom) -> remote_mr`: hand tokens over.
/// - `(send_data_atom, local_mr) -> bytes`, `(receive_data_atom) ->
///   local_mr`: two-sided messages, chunked by the max message length; the
///   receiver gets one `local_mr` per chunk.
/// - `(subscribe_data_atom, data_subscriber) -> chunks`: push every chunk
///   to an actor as `(data_atom, local_mr)` instead (see peer_operations).
/// - `(write_atom, local_mr, remote_mr) -> bytes`,
///   `(read_atom, local_mr, remote_mr) -> bytes`: one-sided RDMA; slices of
///   either side allowed, lengths must match.
/// - `(release_atom, remote_mr) -> bytes`: release peer memory now.
/// - `(peer_atom) -> link_params`: the peer and the negotiated parameters.
/// - `(stats_atom) -> agent_stats`.
///
/// Lifetime: the connection supervises the agent and the transport of its
/// peer.  When the peer goes, it quits with an `errc::peer_gone` error: users
/// `monitor` it to learn (the down message carries the cause).  To close
/// it, `send_exit(conn, caf::exit_reason::user_shutdown)`; pending requests
/// then fail with `errc::closed`.
using connection_actor = peer_operations::extend<
    caf::replies_to<alloc_local_mr_atom, uint64_t, uint64_t>::with<local_mr>,
    caf::replies_to<write_atom, local_mr, remote_mr>::with<uint64_t>,
    caf::replies_to<read_atom, local_mr, remote_mr>::with<uint64_t>,
    caf::replies_to<peer_atom>::with<transport::link_params>>;

/// Spawns the connection of one connected queue pair: its transport, its
/// agent and itself.
connection_actor
spawn_connection(caf::actor_system& sys, transport::device_ptr dev,
                 transport::queue_pair_ptr qp, memory_pool_ptr pool,
                 allocator_actor allocator, const options& opts);

} // namespace rdmactor
