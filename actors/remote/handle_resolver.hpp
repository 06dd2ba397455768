#pragma once

// Internal to remote_actors (remote_actors.cpp makes it, remote_actors_
// deliver.cpp deserializes with it).  Not installed.

#include <caf/actor_system.hpp>
#include <caf/execution_unit.hpp>
#include <caf/node_id.hpp>
#include <caf/proxy_registry.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

#include "actors/remote/remote_actors.hpp"

namespace rdmactor {

/// What CAF's deserializer asks for the actor handles in the peer's
/// messages: the execution unit it runs with, whose proxy registry (one
/// per connection) keeps a proxy per (node, id) the peer named and asks
/// the router to make new ones.  The registry's entries die with the
/// connection (`close` clears it) or when the peer says the actor ended.
class remote_actors::handle_resolver final
    : public caf::proxy_registry::backend,
      public caf::execution_unit {
public:
  explicit handle_resolver(remote_actors& owner)
      : caf::execution_unit(&owner.sys_), owner_(owner),
        registry_(owner.sys_, *this) {
    proxy_registry_ptr(&registry_);
  }

  caf::strong_actor_ptr make_proxy(caf::node_id nid,
                                   caf::actor_id aid) override {
    return owner_.proxy_for_handle(nid, aid);
  }

  void set_last_hop(caf::node_id*) override {
    // One hop: the peer.
  }

  void exec_later(caf::resumable* ptr) override {
    // Never runs actors: the deserializer only makes proxies.
    system().scheduler().enqueue(ptr);
  }

  caf::proxy_registry& registry() noexcept {
    return registry_;
  }

private:
  remote_actors& owner_;
  caf::proxy_registry registry_;
};

} // namespace rdmactor
