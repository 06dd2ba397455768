#pragma once

#include <functional>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/detail/type_list.hpp>
#include <caf/fwd.hpp>

namespace rdmactor {

/// The actor-system module that closes rdmactor's nodes when their actor
/// system shuts down, so that `~actor_system` never waits for a node the
/// application did not close.
///
/// `rdmactor::config` loads it (`load<system_hook>()`).  With it, the
/// actors a node runs for itself (its node actor and allocator) are
/// spawned hidden, so `~actor_system` does not wait for them; after it
/// awaited the application's actors (connections included: a connection
/// ends when its last handle goes, so drop connection handles before the
/// actor system, as any actor handle) it stops its modules, and this one
/// then closes every node still open in that system (stops listening,
/// tells its remaining connections to quit and waits for them and the
/// node actor, at most close-timeout-ms plus 2 s), before CAF's scheduler
/// stops.  Without it (a plain `caf::actor_system_config`) close every
/// node before the actor system ends, or `~actor_system` waits for the
/// node's allocator forever.
///
/// Takes the slot of CAF's `network_manager` module (unused in CAF 0.17).
class system_hook final : public caf::actor_system::module {
public:
  explicit system_hook(caf::actor_system& sys);

  ~system_hook() override;

  /// The factory `actor_system_config::load<system_hook>()` calls.
  static caf::actor_system::module* make(caf::actor_system& sys,
                                         caf::detail::type_list<>) {
    return new system_hook(sys);
  }

  void start() override;

  /// Runs every function registered with `on_shutdown` for this system, in
  /// the order they were registered (called by `~actor_system`).
  void stop() override;

  void init(caf::actor_system_config&) override;

  id_t id() const override;

  void* subtype_ptr() override;

private:
  caf::actor_system& sys_;
};

/// Returns true when `sys` runs a `system_hook` that has not stopped yet.
/// Caller: any thread.
bool has_system_hook(const caf::actor_system& sys);

/// Registers `fn` to run when the system hook of `sys` stops (in the thread
/// that destroys the actor system, before CAF's scheduler stops); returns
/// false (and forgets `fn`) when `sys` has no hook or it stopped already.
/// Caller: any thread.
bool on_shutdown(caf::actor_system& sys, std::function<void()> fn);

/// Spawns `fun(xs...)` hidden when `sys` has a system hook (then
/// `~actor_system` does not wait for it: the hook ends it), else as usual.
/// For a node's own actors (node actor, allocator).
template <class F, class... Ts>
auto spawn_internal(caf::actor_system& sys, F fun, Ts&&... xs) {
  if (has_system_hook(sys))
    return sys.spawn<caf::hidden>(fun, std::forward<Ts>(xs)...);
  return sys.spawn(fun, std::forward<Ts>(xs)...);
}

} // namespace rdmactor
