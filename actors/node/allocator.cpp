#include "rdmactor/allocator.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "rdmactor/system_hook.hpp"

namespace rdmactor {

namespace {

allocator_actor::behavior_type allocator_impl(allocator_actor::pointer self,
                                              memory_pool_ptr pool) {
  return {
      [pool](alloc_atom, uint64_t size, uint64_t align,
             uint32_t access) -> caf::result<local_mr> {
        auto mr = pool->allocate(size, align, access);
        if (!mr)
          return std::move(mr.error());
        return std::move(*mr);
      },
      [pool](stats_atom) { return pool->stats(); },
  };
}

} // namespace

allocator_actor spawn_allocator(caf::actor_system& sys, memory_pool_ptr pool) {
  return spawn_internal(sys, allocator_impl, std::move(pool));
}

} // namespace rdmactor
