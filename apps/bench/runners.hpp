#pragma once

#include "apps/bench/bench_config.hpp"

namespace rdmactor::bench {

/// Runs the plan over rdmactor (both nodes here, or one side of two
/// processes); returns the process exit status (0: every run succeeded).
int run_rdmactor(bench_config& cfg, const bench_plan& plan);

/// Runs the plan over CAF io remote actors; without --listen/--connect it
/// forks the server process first.  Returns the process exit status.
int run_caf_io(bench_config& cfg, const bench_plan& plan);

/// Runs the plan's sends over one plain TCP connection (the medium itself,
/// apps/bench/tcp_baseline.hpp); without --listen/--connect it forks the
/// server process first.  Returns the process exit status.
int run_tcp(bench_config& cfg, const bench_plan& plan);

} // namespace rdmactor::bench
