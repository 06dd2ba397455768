#pragma once

// What the agent fuzz target (agent_fuzz.cpp) keeps across inputs: the
// connection's small limits, the actor system on CAF's test coordinator,
// the fake device, the pool and the allocator (`world`), and what the
// harness tracks of the local user and of the peer's requests.  Included
// by agent_fuzz.cpp only.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "rdmactor/config.hpp"
#include "rdmactor/detail/agent.hpp"
#include "rdmactor/memory_pool.hpp"
#include "test/support/fake_fabric.hpp"

namespace rdmactor::fuzz {
namespace {

/// Negotiated parameters of the fuzzed connection: small, so that limits
/// and credits are reached with short programs.
constexpr uint32_t max_message_len = 256;
constexpr uint32_t recv_depth = 8;

/// Immediate-data bit of a credit-only message (transport_actor.cpp).
constexpr uint32_t credit_only_bit = uint32_t{1} << 31;

/// Bounds of the loops that run the actors to quiescence.
constexpr int max_rounds = 100000;

/// With RDMACTOR_FUZZ_TRACE set, every operation and every frame the agent
/// sends is printed (for replaying a finding).
const bool tracing = std::getenv("RDMACTOR_FUZZ_TRACE") != nullptr;

/// RDMACTOR_FUZZ_TOLERATE=NAME,... lets the fuzzer explore past findings
/// that are reported and not fixed yet (names below).  CI never sets it.
bool tolerated(const char* name) {
  auto* list = std::getenv("RDMACTOR_FUZZ_TOLERATE");
  return list != nullptr && std::strstr(list, name) != nullptr;
}

/// Aborts with `what` unless `ok`: a broken invariant is a finding.
void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "agent_fuzz: %s\n", what);
    std::abort();
  }
}

options fuzz_options() {
  options o;
  o.fabric = "soft";
  o.max_message_len_bytes = max_message_len;
  o.recv_depth = recv_depth;
  o.request_timeout_ms = 1000;
  // Small arenas and allocation limits: the pool zeroes what it hands a
  // peer, and at 1 MiB / 256 KiB zeroing and first-touch page faults were
  // a quarter of the time per input; the limits are reached all the same.
  o.arena_size_bytes = 16 * 1024;
  o.max_alloc_bytes = 64 * 1024;
  o.peer_max_alloc_bytes = 32 * 1024;
  o.peer_max_mrs = 16;
  o.peer_max_queued_bytes = 2048;
  o.peer_max_queued_mrs = 4;
  o.peer_max_pending_requests = 8;
  o.peer_max_violations = 8;
  o.log_level = "off";
  return o;
}

/// Arenas the pool holds at the start of every input, per (access, owner)
/// pair below: enough for most inputs, so that the pool is rebuilt only
/// after the few that grew it.
constexpr int warm_arenas_per_kind = 2;

/// The (access, owner) pairs the pool makes arenas for: the user's regions
/// (the harness's and alloc_local_mr's), the agent's receive copies and
/// rendezvous buffers, and what the peer's AllocMR allocates.
constexpr std::pair<uint32_t, memory_pool::owner> arena_kinds[] = {
    {transport::access::all, memory_pool::owner::user},
    {transport::access::local_write, memory_pool::owner::user},
    {transport::access::all, memory_pool::owner::peers},
};

/// What lives across inputs, created once: the actor system (the test
/// coordinator runs every actor on this thread), the device, the pool and
/// the allocator.  `after_input` brings it back to the
/// state every input starts from.
struct world {
  rdmactor::config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  const options opts = fuzz_options();
  std::shared_ptr<fake_device> dev = std::make_shared<fake_device>();
  memory_pool_ptr pool;
  allocator_actor allocator;
  /// The simulated time every input starts at.
  caf::actor_clock::time_point start_time;
  /// The device's first key, and the first key an input's registrations
  /// get (after the pool's).
  uint32_t device_first_key = 0;
  uint32_t input_first_key = 0;
  /// The pool's arenas at the start of an input.
  uint64_t warm_arenas = 0;
  /// Inputs after which the pool was rebuilt (it had grown).
  uint64_t pool_rebuilds = 0;

  world()
      : sys(init(cfg)), sched(dynamic_cast<caf::scheduler::test_coordinator&>(
                            sys.scheduler())) {
    // As on a host that has been up for a day: no time stamp of an input
    // is close to the clock's epoch.
    start_time = sched.clock().current_time + std::chrono::hours(24);
    sched.clock().current_time = start_time;
    device_first_key = dev->registry->next_key();
    make_pool();
  }

  static rdmactor::config& init(rdmactor::config& cfg) {
    cfg.set("scheduler.policy", caf::atom("testing"));
    return cfg;
  }

  /// Allocates every warm arena whole, fills it with a pattern and drops
  /// it: the first use of pool memory sees the same bytes in every input.
  void scrub() {
    std::vector<local_mr> held;
    for (auto& [access, who] : arena_kinds) {
      for (int i = 0; i < warm_arenas_per_kind; ++i) {
        auto mr = pool->allocate(opts.arena_size_bytes, 64, access, false, who);
        require(static_cast<bool>(mr), "cannot fill the pool's arenas");
        std::memset(mr->data(), 0xbe, mr->size());
        held.emplace_back(std::move(*mr));
      }
    }
  }

  /// Replaces the pool (and the allocator that serves it) by one with
  /// `warm_arenas_per_kind` empty arenas of each kind.
  void make_pool() {
    if (allocator)
      caf::anon_send_exit(allocator, caf::exit_reason::user_shutdown);
    allocator = nullptr;
    pool.reset();
    sched.run();
    require(dev->registry->size() == 0
                && dev->registry->rewind(device_first_key),
            "a registration outlived the pool");
    pool = std::make_shared<memory_pool>(dev, opts.arena_size_bytes,
                                         opts.max_alloc_bytes);
    scrub();
    warm_arenas = pool->stats().arenas;
    allocator = spawn_allocator(sys, pool);
    sched.run();
    input_first_key = dev->registry->next_key();
  }

  /// Checks that the input left nothing behind (every byte back in the
  /// pool, no registration but the pool's, no job, no timer) and brings
  /// back the state every input starts from.
  void after_input() {
    auto st = pool->stats();
    require(st.bytes_in_use == 0 && st.allocations == 0,
            "memory did not return to the pool after the peer left");
    require(dev->registry->size() == st.arenas,
            "a registration outlived the connection");
    require(!sched.has_job() && !sched.has_pending_timeout(),
            "an actor or a timer outlived the connection");
    if (st.arenas != warm_arenas) {
      ++pool_rebuilds;
      if (tracing)
        std::fprintf(stderr,
                     "pool grew to %llu arenas: rebuilt (%llu so far)\n",
                     static_cast<unsigned long long>(st.arenas),
                     static_cast<unsigned long long>(pool_rebuilds));
      make_pool();
    } else {
      scrub();
    }
    sched.clock().current_time = start_time;
    require(dev->registry->rewind(input_first_key),
            "a registration outlived the connection");
  }
};

world* the_world = nullptr;

/// What the local user holds and how its calls went.
struct user_book {
  uint64_t outstanding = 0;
  std::vector<local_mr> locals;
  std::vector<remote_mr> remotes;
  std::optional<agent_stats> stats;

  void keep(local_mr& x) {
    locals.emplace_back(std::move(x));
  }
  void keep(remote_mr& x) {
    remotes.emplace_back(std::move(x));
  }
  void keep(agent_stats& x) {
    stats = x;
  }
  void keep(mr_token&) {
    // nothing to hold
  }
  void keep(uint64_t&) {
    // nothing to hold
  }
};

/// What the peer knows about one request id it used.
struct inbound_request {
  int kind = 0; // pb::Request body case
  uint64_t alloc_size = 0;
  uint32_t sent = 0;
  uint32_t answered = 0;
  bool ambiguous = false; // the id was reused with other content
};

} // namespace
} // namespace rdmactor::fuzz
