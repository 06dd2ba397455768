#pragma once

#include <cstdint>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "rdmactor/atoms.hpp"
#include "rdmactor/memory_pool.hpp"

namespace rdmactor {

/// The allocator actor: one per node, owns the node's registered memory.
///
/// - `(alloc_atom, size, align, access) -> local_mr`: registered memory
///   (see `memory_pool::allocate` for the errors).
/// - `(stats_atom) -> allocator_stats`: bytes in use, arenas registered.
///
/// Agents allocate on behalf of peers from the same pool, so `stats`
/// accounts for every byte of the node.
using allocator_actor = caf::typed_actor<
    caf::replies_to<alloc_atom, uint64_t, uint64_t, uint32_t>::with<local_mr>,
    caf::replies_to<stats_atom>::with<allocator_stats>>;

/// Spawns the allocator actor serving `pool`.
allocator_actor spawn_allocator(caf::actor_system& sys, memory_pool_ptr pool);

} // namespace rdmactor
