#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "apps/bench/bench_config.hpp"
#include "apps/bench/report.hpp"
#include "rdmactor/node.hpp"

namespace rdmactor::bench {

/// Runs `--op=connect`: opens `plan.peers` connections from `client` to the
/// server at `addr`, one after another, timing each; holds them for
/// `plan.hold_ms` and reads what this process costs then (threads, RSS,
/// registered bytes, fds, also before the first connect); sends 8 bytes on
/// each and waits for every echo; closes them.  Prints a table, or one JSON
/// object with `--json`.  Returns the exit status (0: every connection
/// connected and echoed).  Caller: the main thread (it blocks).
int run_connect(caf::actor_system& sys, const bench_plan& plan, node& client,
                const std::string& addr, const run_context& ctx);

/// Opens `n` connections to `addr` that stay idle (`--idle-peers`), with a
/// progress line on stderr every tenth; fails with the first error.
caf::expected<std::vector<connection_actor>>
open_idle_peers(node& client, const std::string& addr, uint32_t n);

} // namespace rdmactor::bench
