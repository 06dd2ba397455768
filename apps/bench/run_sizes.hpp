#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "apps/bench/bench_config.hpp"
#include "apps/bench/process_stats.hpp"
#include "apps/bench/report.hpp"
#include "apps/bench/run_channel.hpp"

namespace rdmactor::bench {

/// CPU seconds of the processes `pids` so far (see cpu_seconds).
inline double cpu_seconds_of(const std::vector<int>& pids) {
  double sum = 0;
  for (auto pid : pids)
    sum += cpu_seconds(pid);
  return sum;
}

/// Upper bound of one run, a guard against a stuck driver (each request
/// has its own, shorter timeout).
constexpr auto run_limit = std::chrono::minutes(10);

/// Runs every size of `plan` on `lanes` connections at once: per size one
/// driver per lane from `spawn(const run_spec&, run_channel_ptr, size_t
/// lane) -> caf::actor`, all started before any is waited for; prints the
/// combined outcome (combine_lanes) to `out`.
template <class Spawn>
void run_lanes(const bench_plan& plan, size_t lanes, report_printer& out,
               Spawn spawn) {
  for (auto size : plan.sizes) {
    auto spec = plan.spec_for(size);
    std::vector<run_channel_ptr> chans;
    std::vector<caf::actor> drivers;
    auto cpu0 = cpu_seconds_of(out.context().cpu_pids);
    for (size_t i = 0; i < lanes; ++i) {
      chans.push_back(std::make_shared<run_channel>(spec.warmup + spec.iters));
      drivers.push_back(spawn(spec, chans.back(), i));
    }
    auto label = std::string{to_string(spec.op)} + " " + to_string(spec.mode)
                 + " " + std::to_string(size) + " B";
    std::vector<run_outcome> xs;
    for (size_t i = 0; i < lanes; ++i)
      xs.push_back(wait_for_run(
          *chans[i],
          lanes == 1 ? label : label + ", connection " + std::to_string(i + 1),
          run_limit));
    auto x = combine_lanes(std::move(xs));
    x.cpu_s = cpu_seconds_of(out.context().cpu_pids) - cpu0;
    x.all_bytes = lanes * (spec.warmup + spec.iters) * spec.size;
    for (auto& d : drivers)
      caf::anon_send_exit(d, caf::exit_reason::user_shutdown);
    out.print(spec, x);
  }
  out.finish();
}

/// Runs every size of `plan`, one driver per size from
/// `spawn(const run_spec&, run_channel_ptr) -> caf::actor`, waits for each
/// and prints it to `out` (run_lanes with one lane).
template <class Spawn>
void run_sizes(const bench_plan& plan, report_printer& out, Spawn spawn) {
  run_lanes(plan, 1, out,
            [&](const run_spec& spec, run_channel_ptr chan, size_t) {
              return spawn(spec, std::move(chan));
            });
}

} // namespace rdmactor::bench
