#include "rdmactor/connection.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>

#include "rdmactor/detail/completion_mode.hpp"

namespace rdmactor {

connection_actor
spawn_connection(caf::actor_system& sys, transport::device_ptr dev,
                 transport::queue_pair_ptr qp, memory_pool_ptr pool,
                 allocator_actor allocator, const options& opts,
                 actor_directory_ptr node_actors, uint64_t node) {
  auto link = transport::link_params_of(*qp);
  auto how = transport::effective_polling(*dev, transport::polling_of(opts));
  // The receives are posted before this returns, so a peer may talk to us
  // as soon as the caller learns about the connection.
  auto transport = transport::spawn_lending_transport(sys, std::move(dev),
                                                      std::move(qp), how);
  // The agent plays the connection and drives its link: users' calls reach
  // the queue pair in one hop (user -> agent), answers come back in one.
  return caf::actor_cast<connection_actor>(
      spawn_agent(sys, std::move(transport), std::move(link), std::move(pool),
                  std::move(allocator), opts, std::move(node_actors), node));
}

} // namespace rdmactor
