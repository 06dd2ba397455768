#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "rdmactor/allocator.hpp"
#include "rdmactor/connection.hpp"
#include "rdmactor/node_actor.hpp"
#include "rdmactor/options.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor {

class node_core;

/// The blocking facade over a node actor, for `main`, tests and other
/// blocking contexts (as CAF's `function_view` is a blocking facade over an
/// actor).  One per process and fabric.
///
/// `open` spawns a node actor (`node_actor.hpp`); `listen` and `close`
/// send it the matching request and wait for the answer (bounded:
/// request_timeout_ms plus 10 s of slack for a busy scheduler); `connect`
/// runs on the calling thread (bounded by connect_timeout_ms).  The accessors
/// (allocator, pool, device, memory_stats) read the node's machinery directly;
/// they are thread-safe.  Code that runs inside actors uses `actor()` (or
/// `spawn_node`) and never blocks.
///
/// Shutdown order: `close()` (also run by the destructor) stops
/// listening and closes every connection.  With `rdmactor::config` (it
/// loads `system_hook`) a node still open when its actor system shuts down
/// is closed by the system, so `~actor_system` does not wait for it; the
/// facade may then outlive the system (its calls fail with `closed`).
/// Connection handles are actor handles: drop them before the system.
/// With a plain `caf::actor_system_config`, close the node first.
class node {
public:
  /// Opens the fabric named by `opts.fabric`, spawns the allocator and the
  /// node actor.  Errors: `fabric_unavailable`, `device_not_found`,
  /// `invalid_argument` (options out of range; the message names the
  /// option).  Caller: any thread.
  static caf::expected<std::unique_ptr<node>> open(caf::actor_system& sys,
                                                   options opts);

  ~node();

  node(const node&) = delete;
  node& operator=(const node&) = delete;

  /// Connects to `host_port` ("HOST:PORT") on the calling thread, blocking
  /// for at most connect_timeout_ms, and returns the connection
  /// actor.  Errors: `connect_failed`, `connect_timeout`,
  /// `invalid_address`, `closed` once the node closes.  Caller: a blocking
  /// context (not a CAF worker: use `actor()` there).
  caf::expected<connection_actor> connect(const std::string& host_port);

  /// Listens on `host_port` (port 0: any free port) and returns the bound
  /// port.  Each accepted peer becomes a connection actor, delivered to
  /// `acceptor` as `(accepted_atom, connection_actor)`.  A node may listen
  /// on several addresses; closing the node stops them all.
  caf::expected<uint16_t> listen(const std::string& host_port,
                                 acceptor_actor acceptor);

  /// The same for an untyped handler that takes `(accepted_atom,
  /// connection_actor)` (e.g. a scoped_actor).
  caf::expected<uint16_t> listen(const std::string& host_port,
                                 caf::actor handler);

  /// Listens on `host_port` like the overloads above, and keeps every
  /// accepted connection itself (until the peer goes or the node closes):
  /// for a server that only publishes actors (`publish`), as CAF io's
  /// `publish(actor, port)`.  Caller: a blocking context.
  caf::expected<uint16_t> listen(const std::string& host_port);

  /// Connects to `host_port` and returns a proxy of the actor the peer
  /// published there under `name` (CAF io's `remote_actor`).  The node
  /// keeps the connection while it is open: later calls for the same
  /// `host_port` reuse it (a connection that ended is replaced once).
  /// Errors: those of `connect`, `unknown_actor` (nothing published under
  /// the name), `not_negotiated` (a peer without remote actors), `closed`.
  /// Caller: a blocking context (not a CAF worker).
  caf::expected<caf::actor> remote_actor(const std::string& host_port,
                                         const std::string& name);

  /// The same for a typed handle: the lookup checks the published actor's
  /// interface against `Handle`'s (`invalid_argument` on a mismatch, as
  /// `(lookup_atom, name, interface_of<Handle>(sys))` does).
  template <class Handle>
  caf::expected<Handle> remote_actor(const std::string& host_port,
                                     const std::string& name) {
    auto res = lookup_remote(host_port, name, interface_of<Handle>(sys_));
    if (!res)
      return std::move(res.error());
    return caf::actor_cast<Handle>(std::move(*res));
  }

  /// Publishes `actor` under `name` for every connection of this node,
  /// present and future: a peer gets a proxy of it with `(lookup_atom,
  /// name)` on its connection (see `connection_actor`).  A name published
  /// on a connection itself takes precedence there.  Returns whether
  /// another actor was published under the name; `invalid_argument` for
  /// an empty name, one over 256 bytes, or an invalid actor; `closed`
  /// after close().  The node holds the actor until unpublished or closed.
  /// Any thread.
  caf::expected<bool> publish(const std::string& name, caf::actor actor);

  /// The same for any other actor handle (a typed actor, a
  /// `caf::strong_actor_ptr`), as CAF io's `publish` takes any handle.
  template <class Handle>
  caf::expected<bool> publish(const std::string& name, const Handle& actor) {
    return publish(name, caf::actor_cast<caf::actor>(actor));
  }

  /// Unpublishes `name` (new lookups fail with `unknown_actor`; proxies
  /// peers hold keep working while the actor lives); returns whether
  /// something was published under it.  Any thread.
  bool unpublish(const std::string& name);

  /// Returns the node actor behind this facade (null after close()).
  /// Any thread.
  node_actor actor() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return hdl_;
  }

  /// Returns the allocator actor.
  const allocator_actor& allocator() const noexcept;

  /// Returns the byte accounting of the node's memory (any thread).
  allocator_stats memory_stats() const;

  /// Returns the memory pool (registered memory, thread-safe).
  const memory_pool_ptr& pool() const noexcept;

  const options& opts() const noexcept;

  /// Returns the opened device ("soft0", "rxe0", ...).
  const transport::device_ptr& device() const noexcept;

  /// Returns the bytes of receive buffers the node's connections share
  /// (`shared-receive-queue`; 0 without).  They grow with traffic and stay
  /// until the node closes.  Any thread.
  uint64_t shared_receive_bytes() const noexcept;

  /// Returns true once the node is closed or closing (by close(), through
  /// its actor, or by the actor system's shutdown).
  bool closed() const noexcept;

  /// Stops listening, closes every connection and the allocator: sends the
  /// node actor `close_atom` and waits for its answer.  Idempotent, and safe
  /// while other threads connect or listen: a connect that finishes after
  /// close() began closes its new queue pair and fails with `closed`, as do
  /// later calls; a peer accepted meanwhile is dropped.  A no-op once the
  /// actor system's shutdown closed the node.
  void close();

private:
  node(caf::actor_system& sys, std::shared_ptr<node_core> core, node_actor hdl);

  caf::expected<caf::actor> lookup_remote(const std::string& host_port,
                                          const std::string& name,
                                          std::vector<std::string> interface);

  caf::actor_system& sys_;
  std::shared_ptr<node_core> core_;
  /// Guards hdl_: close() may run while other threads connect or listen.
  mutable std::mutex mtx_;
  node_actor hdl_;
  /// Connections kept for `remote_actor` (by host_port) and the actor that
  /// keeps what `listen(host_port)` accepted; guarded by mtx_.
  std::map<std::string, connection_actor> remote_conns_;
  caf::actor keeper_;
};

} // namespace rdmactor
