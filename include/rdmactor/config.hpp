#pragma once

#include <string>

#include <caf/actor_system_config.hpp>

#include "rdmactor/options.hpp"

namespace rdmactor {

/// A CAF configuration that knows rdmactor: binds `options` to the section
/// `[rdmactor]` of the ini file and to `--rdmactor.NAME=VALUE` on the
/// command line, registers the `rdmactor` error category, bounds
/// `scheduler.max-throughput` (see `default_max_throughput`), keeps idle
/// workers from napping while work may come (see
/// `default_moderate_sleep_ns`) and from waking for nothing once it
/// stopped (see `default_relaxed_sleep_ns`) and loads
/// `system_hook`, which closes nodes still open when the actor system
/// shuts down (so `~actor_system` never waits for a node).
///
/// Derive from it to add options of your own, then
/// `cfg.parse(argc, argv, rdmactor::default_config_file().c_str())` as
/// with any CAF config (or name your own file).
class config : public caf::actor_system_config {
public:
  config();

  /// The `scheduler.max-throughput` this config sets: messages an actor
  /// handles before its worker serves others.  Bounded so that a transport
  /// actor polling its CQ shares its worker (see completion_mode.hpp).
  static constexpr int default_max_throughput = 8;

  /// The `work-stealing.moderate-sleep-duration` this config sets, in
  /// nanoseconds: 0, an idle worker polls without napping before it waits
  /// to be woken (CAF's own default is 50 us).
  static constexpr int64_t default_moderate_sleep_ns = 0;

  /// The `work-stealing.relaxed-sleep-duration` this config sets, in
  /// nanoseconds: 100 ms.  A worker with nothing to do waits on a condition
  /// variable that a message from outside signals; this is how often it
  /// also wakes to steal work queued on a busy worker (CAF's own default
  /// is 10 ms: with 4 workers, 400 wake-ups a second, about 1 % of a core
  /// for a process with one idle connection; docs/benchmarks.md, "Idle
  /// workers").
  static constexpr int64_t default_relaxed_sleep_ns = 100'000'000;

  /// The options, filled in by `parse`.  Validate with `validate(opts)`.
  options opts;

  /// Returns the help text of every `rdmactor.*` option, in the format of
  /// CAF's `--help` (which lists only the global options): print it after
  /// `--help` (`cli_helptext_printed`) so that users see them.
  std::string rdmactor_help() const;
};

/// The config file rdmactor's programs load when `--config-file` names
/// none: `$RDMACTOR_CONFIG` when set; else `share/rdmactor/rdmactor.ini`
/// of the install prefix the running program lives in (`<prefix>/bin`);
/// else the source tree's config/rdmactor.ini when the program runs from
/// the build tree; else "" (CAF reads no file).  See docs/configuration.md.
std::string default_config_file();

} // namespace rdmactor
