#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "apps/bench/run_spec.hpp"
#include "rdmactor/config.hpp"
#include "rdmactor/options.hpp"

namespace rdmactor::bench {

/// The command line of rdmactor-bench: CAF options in category "global"
/// (`--op=send`), plus every `rdmactor.*` option of `rdmactor::config`.
class bench_config : public rdmactor::config {
public:
  std::string op = "send";
  std::string mode = "lat";
  std::string size;
  std::string sizes;
  uint64_t iters = 0;
  int64_t warmup = -1;
  uint32_t window = 32;
  std::string fabric;
  std::string device;
  std::string listen;
  std::string connect;
  std::string host = "127.0.0.1";
  std::string baseline;
  bool json = false;
  uint32_t timeout_ms = 30000;
  uint32_t peers = 100;
  uint32_t hold_ms = 0;
  uint32_t connect_threads = 1;
  uint32_t idle_peers = 0;
  uint32_t connections = 1;
  bool plain_actors = false;
  bool actor_echo = false;
  bool actor_driver = false;
  bool stats = false;
  bool fork_server = false;

  bench_config();
};

/// The validated plan of one invocation.
struct bench_plan {
  bench_op op = bench_op::send;
  bench_mode mode = bench_mode::lat;
  /// One run per size, in this order.
  std::vector<uint64_t> sizes;
  /// 0: pick per size (see `iters_for`).
  uint64_t iters = 0;
  /// -1: pick per run (see `spec_for`).
  int64_t warmup = -1;
  uint32_t window = 32;
  std::chrono::milliseconds op_timeout{30000};
  bool json = false;
  /// "" (rdmactor) or "caf-io".
  std::string baseline;
  std::string listen;
  std::string connect;
  /// Address of both nodes in one process.
  std::string host;
  /// rdmactor options with --fabric/--device applied.
  options opts;
  /// --op=connect: connections to open, and how long to hold them.
  uint32_t peers = 100;
  uint32_t hold_ms = 0;
  /// --op=connect: threads that call node::connect at once.
  uint32_t connect_threads = 1;
  /// send, write, read: idle connections opened before the measured one.
  uint32_t idle_peers = 0;
  /// send, write, read: busy connections, each with its own driver running
  /// the same spec at once; the row reports their sum (run_lanes).
  uint32_t connections = 1;
  /// The driver and the echo server are plain CAF actors (CAF's spawn),
  /// not run through a scheduler job (rdmactor::spawn_with_scheduler_job).
  bool plain_actors = false;
  /// The echo server echoes from an actor (a data_subscriber), not from a
  /// data handler inside the connection's agent.
  bool actor_echo = false;
  /// send, write and read: the client's driver actor issues the
  /// operations, not a data handler (run_spec::in_handler).
  bool actor_driver = false;
  /// send and actor: print the client connection's agent_stats after the
  /// runs (how its frames were packed, how its acknowledgements came).
  bool stats = false;
  /// rdmactor without --listen/--connect: the server node runs in a child
  /// process forked before this one has threads (two processes, as the
  /// baselines run), not as a second node of this process.
  bool fork_server = false;

  /// Returns the spec of the run for `size`.
  run_spec spec_for(uint64_t size) const;

  /// Returns true when this process runs both sides, or forks the server
  /// (no --listen/--connect).
  bool in_process() const noexcept {
    return listen.empty() && connect.empty();
  }
};

/// Parses "4096", "4K", "64K", "1M" (binary units); false on garbage.
bool parse_size(const std::string& str, uint64_t& out);

/// Builds the plan from a parsed configuration, or an `invalid_argument`
/// error naming the bad option.
caf::expected<bench_plan> make_plan(const bench_config& cfg);

} // namespace rdmactor::bench
