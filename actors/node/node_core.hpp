#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "rdmactor/allocator.hpp"
#include "rdmactor/connection.hpp"
#include "rdmactor/detail/actor_directory.hpp"
#include "rdmactor/node_actor.hpp"
#include "rdmactor/options.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor {

/// The node's machinery, shared by the node actor (`node_actor.hpp`) and
/// the blocking `node` facade over it (internal: users hold either of
/// those).
///
/// Opens the configured fabric, owns the node's memory pool and allocator
/// actor, accepts and makes connections (blocking calls: the node actor
/// runs them on helper threads).  `close()` (also run by the destructor)
/// stops listening and closes every connection.  When the actor system
/// runs rdmactor's `system_hook` (rdmactor::config loads it), the core
/// registers itself there and closes when the system shuts down.
class node_core {
public:
  /// The error of every call made after close(): names the remedy.
  static caf::error closed_error();

  /// Opens the fabric named by `opts.fabric` and spawns the allocator.
  /// Errors: `fabric_unavailable`, `device_not_found`, `invalid_argument`
  /// (options out of range; the message names the option).
  static caf::expected<std::shared_ptr<node_core>> open(caf::actor_system& sys,
                                                        options opts);

  ~node_core();

  node_core(const node_core&) = delete;
  node_core& operator=(const node_core&) = delete;

  /// Connects to `host_port` ("HOST:PORT"), blocking for at most
  /// connect_timeout_ms, and returns the connection actor.
  caf::expected<connection_actor> connect(const std::string& host_port);

  /// Listens on `host_port` (port 0: any free port) and returns the bound
  /// port.  Each accepted peer becomes a connection actor, delivered to
  /// `handler` as `(accepted_atom, connection_actor)`.  A node may listen
  /// on several addresses.
  caf::expected<uint16_t> listen(const std::string& host_port,
                                 caf::actor handler);

  /// Publishes `actor` under `name` for every connection of this node,
  /// present and future: a peer gets a proxy of it with `(lookup_atom,
  /// name)` on its connection (see `connection_actor`).  A name published
  /// on a connection itself takes precedence there.  Returns whether
  /// another actor was published under the name; `invalid_argument` for
  /// an empty name, one over 256 bytes, or an invalid actor.  The node
  /// holds the actor until unpublished or closed.  Any thread.
  caf::expected<bool> publish(const std::string& name, caf::actor actor);

  /// Unpublishes `name` (new lookups fail with `unknown_actor`; proxies
  /// peers hold keep working while the actor lives); returns whether
  /// something was published under it.  Any thread.
  bool unpublish(const std::string& name);

  /// Returns the allocator actor.
  const allocator_actor& allocator() const noexcept {
    return allocator_;
  }

  /// Returns the byte accounting of the node's memory (any thread).
  allocator_stats memory_stats() const {
    return pool_->stats();
  }

  /// Returns the memory pool (registered memory, thread-safe).
  const memory_pool_ptr& pool() const noexcept {
    return pool_;
  }

  const options& opts() const noexcept {
    return opts_;
  }

  /// Returns the opened device ("soft0", "rxe0", ...).
  const transport::device_ptr& device() const noexcept {
    return dev_;
  }

  /// Returns the bytes of the shared receive buffers (0 without).
  uint64_t shared_receive_bytes() const noexcept;

  /// Stops listening, closes every connection and the allocator.
  /// Idempotent, and safe while other threads connect or listen: a
  /// connect() that finishes after close() began closes its new queue pair
  /// and fails with `closed`, as do later calls; a peer accepted meanwhile
  /// is dropped.  Every connection actor this node made is told to quit.
  void close();

  /// Returns true once close() began (also when the actor system's hook
  /// closed the node).
  bool closing() const noexcept {
    return closing_.load();
  }

  /// Records the node actor that owns this core (the hook ends it).
  void set_actor(caf::actor_addr addr);

  /// Closes the node as the actor system shuts down (the system hook calls
  /// it, in the thread that destroys the system): close(), an exit to the
  /// node actor, then waits for the node actor and every connection to
  /// end, at most close_timeout_ms + 2 s.
  void shutdown_with_system();

private:
  node_core(caf::actor_system& sys, options opts, transport::device_ptr dev);

  /// Parses HOST:PORT; fails with `closed` once the node is closing.
  caf::expected<std::pair<std::string, uint16_t>>
  endpoint(const std::string& host_port) const;

  /// Returns the connection parameters this node offers.
  transport::conn_params offer() const;

  /// Spawns the connection actor of `qp` and keeps its address for
  /// close(); fails with `closed` once the node is closing (`qp` closes).
  caf::expected<connection_actor> adopt(transport::queue_pair_ptr qp);

  struct acceptor {
    std::unique_ptr<transport::listener> listener;
    std::thread thread;
  };

  caf::actor_system& sys_;
  options opts_;
  transport::device_ptr dev_;
  /// The node's identity, which every connection's Hello carries: the
  /// connections of this node to one peer node share keepalive
  /// (actors/core/node_liveness.hpp).
  uint64_t id_ = 0;
  /// The buffers of the device's shared receive queue (shared-receive-
  /// queue=true); null otherwise.
  std::shared_ptr<transport::shared_receives> receives_;
  memory_pool_ptr pool_;
  allocator_actor allocator_;
  std::atomic<bool> closing_{false};
  std::mutex mtx_;
  std::vector<std::unique_ptr<acceptor>> acceptors_;
  std::vector<caf::actor_addr> connections_;
  /// `adopt` forgets the connections that went once the list has this many.
  size_t sweep_connections_at_ = 64;
  caf::actor_addr actor_;
  /// Actors published for every connection (publish).
  actor_directory_ptr published_ = std::make_shared<actor_directory>();
};

} // namespace rdmactor

namespace rdmactor {

/// Spawns the node actor that owns `core` (hidden under the system hook)
/// and records it in the core.  Caller: spawn_node and node::open.
node_actor spawn_node_actor(caf::actor_system& sys,
                            std::shared_ptr<node_core> core);

} // namespace rdmactor
