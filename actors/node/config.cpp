#include "rdmactor/config.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <caf/config_option.hpp>
#include <caf/settings.hpp>

#include "rdmactor/error.hpp"
#include "rdmactor/system_hook.hpp"

namespace rdmactor {

config::config() {
  add_options(custom_options_, opts);
  // A transport actor that polls its CQ (completion-mode busy or adaptive)
  // reschedules itself; CAF lets an actor keep its worker for this many
  // messages before others run (unbounded by default, which would let a
  // polling actor starve the actors queued behind it on its worker).  The
  // ini file or the command line may override it.
  // Written into the settings directly: `set` validates through the
  // option's meta data, which crashed in clang builds against Debian's
  // gcc-built libcaf (the libFuzzer target).
  caf::put(content, "scheduler.max-throughput",
           static_cast<int64_t>(default_max_throughput));
  // An idle CAF worker polls its queue 100 times, then 500 times with a
  // 50 us sleep between polls, then waits on a condition variable that a
  // message from outside (a fabric thread's completion notice) signals.
  // The 50 us naps delay every hand-off to a napping worker by 25 us on
  // average and cost a context switch each; polling those 500 times
  // without sleeping and then waiting on the condition variable cut the
  // soft send latency by ~30 % at about the same CPU per round trip
  // (docs/benchmarks.md, "CAF's worker naps").
  caf::put(content, "work-stealing.moderate-sleep-duration",
           caf::timespan{default_moderate_sleep_ns});
  // Once idle, a worker waits on that condition variable, and wakes every
  // relaxed-sleep-duration to steal from busy workers: 100 ms instead of
  // CAF's 10 ms, so that a process whose connections are idle does not
  // wake its workers 100 times a second each.
  caf::put(content, "work-stealing.relaxed-sleep-duration",
           caf::timespan{default_relaxed_sleep_ns});
  register_error_category(*this);
  // Closes nodes still open when the actor system shuts down (and spawns
  // rdmactor's own actors hidden, so ~actor_system does not wait for them).
  load<system_hook>();
}

std::string config::rdmactor_help() const {
  std::vector<std::pair<std::string, std::string>> lines;
  size_t width = 0;
  for (auto& opt : custom_options_) {
    if (opt.category() != "rdmactor")
      continue;
    std::string lhs = "--";
    lhs.append(opt.full_name().begin(), opt.full_name().end());
    if (!opt.is_flag()) {
      lhs += "=<";
      lhs.append(opt.type_name().begin(), opt.type_name().end());
      lhs += ">";
    }
    width = std::max(width, lhs.size());
    lines.emplace_back(std::move(lhs), std::string{opt.description().begin(),
                                                   opt.description().end()});
  }
  std::string out = "rdmactor options (defaults and units: "
                    "config/rdmactor.ini, section [rdmactor]):\n";
  for (auto& [lhs, rhs] : lines) {
    out += "  ";
    out += lhs;
    out.append(width - lhs.size(), ' ');
    out += " : ";
    out += rhs;
    out += "\n";
  }
  return out;
}

} // namespace rdmactor
