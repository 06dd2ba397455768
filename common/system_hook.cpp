#include "rdmactor/system_hook.hpp"

#include "common/node_identity.hpp"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace rdmactor {

namespace {

/// The shutdown functions of each system that runs a hook.
struct hook_registry {
  std::mutex mtx;
  std::map<const caf::actor_system*, std::vector<std::function<void()>>> fns;

  static hook_registry& instance() {
    static hook_registry reg;
    return reg;
  }
};

} // namespace

system_hook::system_hook(caf::actor_system& sys) : sys_(sys) {
  // Before the system spawns anything: each actor keeps its spawn's id.
  assign_node_id(sys_);
  auto& reg = hook_registry::instance();
  std::lock_guard<std::mutex> guard{reg.mtx};
  reg.fns[&sys_];
}

system_hook::~system_hook() {
  auto& reg = hook_registry::instance();
  std::lock_guard<std::mutex> guard{reg.mtx};
  reg.fns.erase(&sys_);
}

void system_hook::start() {
  // nop: the hook only acts when the system stops
}

void system_hook::stop() {
  std::vector<std::function<void()>> closers;
  {
    auto& reg = hook_registry::instance();
    std::lock_guard<std::mutex> guard{reg.mtx};
    auto i = reg.fns.find(&sys_);
    if (i == reg.fns.end())
      return;
    closers = std::move(i->second);
    reg.fns.erase(i); // stopped: later registrations are refused
  }
  for (auto& fn : closers)
    fn();
}

void system_hook::init(caf::actor_system_config&) {
  // nop
}

caf::actor_system::module::id_t system_hook::id() const {
  return network_manager;
}

void* system_hook::subtype_ptr() {
  return this;
}

bool has_system_hook(const caf::actor_system& sys) {
  auto& reg = hook_registry::instance();
  std::lock_guard<std::mutex> guard{reg.mtx};
  return reg.fns.count(&sys) != 0;
}

bool on_shutdown(caf::actor_system& sys, std::function<void()> fn) {
  auto& reg = hook_registry::instance();
  std::lock_guard<std::mutex> guard{reg.mtx};
  auto i = reg.fns.find(&sys);
  if (i == reg.fns.end())
    return false;
  i->second.push_back(std::move(fn));
  return true;
}

} // namespace rdmactor
