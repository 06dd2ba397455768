#pragma once

#include <cstdint>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "rdmactor/detail/agent.hpp"

namespace rdmactor {

/// Spawns the connection of one connected queue pair: its transport actor
/// (QP and CQ) and its agent, which plays the connection (the typed handle
/// returned here; see `connection_actor` in agent.hpp).  `node`: the
/// identity of the node it belongs to, which its Hello carries (0: none);
/// the connections of one node to one peer node share keepalive.
connection_actor
spawn_connection(caf::actor_system& sys, transport::device_ptr dev,
                 transport::queue_pair_ptr qp, memory_pool_ptr pool,
                 allocator_actor allocator, const options& opts,
                 actor_directory_ptr node_actors = nullptr, uint64_t node = 0);

} // namespace rdmactor
