#pragma once

// One actor system run by CAF's test coordinator, for the deterministic
// harness (agent_harness.hpp): a side's node, or both sides at once.

#include <chrono>
#include <memory>

#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/detail/test_actor_clock.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "rdmactor/config.hpp"

namespace rdmactor::test {

/// One actor system on CAF's test coordinator, with its config.
class harness_world {
public:
  /// Starts a system of `cfg` with the test coordinator as its scheduler.
  explicit harness_world(std::unique_ptr<rdmactor::config> cfg)
      : cfg_(std::move(cfg)), sys_(init(*cfg_)),
        sched_(
            dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler())) {
    // Far from the clock's epoch, as on a host that has been up a while.
    sched_.clock().current_time += std::chrono::hours(24);
  }

  harness_world(const harness_world&) = delete;
  harness_world& operator=(const harness_world&) = delete;

  caf::actor_system& sys() noexcept {
    return sys_;
  }

  caf::scheduler::test_coordinator& sched() noexcept {
    return sched_;
  }

  /// The simulated clock of this system.
  caf::detail::test_actor_clock& clock() noexcept {
    return sched_.clock();
  }

private:
  static rdmactor::config& init(rdmactor::config& cfg) {
    cfg.set("scheduler.policy", caf::atom("testing"));
    return cfg;
  }

  std::unique_ptr<rdmactor::config> cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
};

} // namespace rdmactor::test
