#include "rdmactor/node_actor.hpp"

#include <memory>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/node/node_core.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/system_hook.hpp"

namespace rdmactor {

namespace {

using core_ptr = std::shared_ptr<node_core>;

struct node_state {
  /// Null once `close_atom` handed the node to its closing helper.
  core_ptr nd;

  node_state() = default;
  node_state(const node_state&) = delete;
  node_state& operator=(const node_state&) = delete;

  ~node_state() {
    // The last handle went, or the actor was killed: close here.  Bounded:
    // closing the listeners wakes their acceptor threads at once.
    if (nd)
      nd->close();
  }

  static inline const char* name = "rdmactor.node";
};

using node_self = node_actor::stateful_pointer<node_state>;

/// Runs one blocking node_core::connect on a thread of its own and
/// answers the request that the node actor delegated to it.
using connect_helper = caf::typed_actor<
    caf::replies_to<connect_atom, std::string>::with<connection_actor>>;

/// Runs node_core::close (it joins the acceptor threads) on a thread of
/// its own and answers the close request delegated to it.
using close_helper = caf::typed_actor<caf::replies_to<close_atom>::with<bool>>;

caf::error actor_closed_error() {
  return make_error(errc::closed,
                    "the node actor was closed; spawn a new node");
}

node_actor::behavior_type node_impl(node_self self, core_ptr nd) {
  self->state.nd = std::move(nd);
  return {
      [self](connect_atom,
             const std::string& host_port) -> caf::result<connection_actor> {
        if (!self->state.nd || self->state.nd->closing())
          return actor_closed_error();
        // node_core::connect blocks for up to connect_timeout_ms: on a
        // thread of its own (a detached helper), never on a CAF worker.
        // The request is delegated: the helper answers the caller itself,
        // from its own thread, as any actor answers its requests (a
        // promise of ours delivered from the helper's thread raced with
        // this actor's scheduling: TSan), and a close of this actor does
        // not drop the answer.
        auto helper = self->spawn<caf::detached>(
            [nd = self->state.nd](
                connect_helper::pointer h) -> connect_helper::behavior_type {
              return {
                  [h, nd](connect_atom, const std::string& where)
                      -> caf::result<connection_actor> {
                    auto conn = nd->connect(where);
                    h->quit();
                    if (!conn)
                      return std::move(conn.error());
                    return std::move(*conn);
                  },
              };
            });
        return self->delegate(helper, connect_atom::value, host_port);
      },
      [self](listen_atom, const std::string& host_port,
             const acceptor_actor& acceptor) -> caf::result<uint16_t> {
        if (!self->state.nd)
          return actor_closed_error();
        if (!acceptor)
          return make_error(errc::invalid_argument,
                            "listen needs an acceptor actor; pass a live "
                            "handle that takes (accepted_atom, "
                            "connection_actor)");
        auto port = self->state.nd->listen(
            host_port, caf::actor_cast<caf::actor>(acceptor));
        if (!port)
          return std::move(port.error());
        return *port;
      },
      [self](stats_atom) -> caf::result<allocator_stats> {
        if (!self->state.nd)
          return actor_closed_error();
        return self->state.nd->memory_stats();
      },
      [self](close_atom) -> caf::result<bool> {
        if (!self->state.nd)
          return false;
        // node_core::close joins the acceptor threads: not on a worker.
        // Delegated like connect, so that the helper answers the caller
        // from its own thread while this actor is already gone.
        auto helper = self->spawn<caf::detached>(
            [nd = std::move(self->state.nd)](
                close_helper::pointer h) -> close_helper::behavior_type {
              return {
                  [h, nd](close_atom) -> bool {
                    auto was_open = !nd->closing();
                    nd->close();
                    h->quit();
                    return was_open;
                  },
              };
            });
        self->quit();
        return self->delegate(helper, close_atom::value);
      },
  };
}

} // namespace

node_actor spawn_node_actor(caf::actor_system& sys,
                            std::shared_ptr<node_core> core) {
  auto* raw = core.get();
  auto hdl = spawn_internal(sys, node_impl, std::move(core));
  raw->set_actor(hdl.address());
  return hdl;
}

caf::expected<node_actor> spawn_node(caf::actor_system& sys, options opts) {
  auto nd = node_core::open(sys, std::move(opts));
  if (!nd)
    return std::move(nd.error());
  return spawn_node_actor(sys, std::move(*nd));
}

} // namespace rdmactor
