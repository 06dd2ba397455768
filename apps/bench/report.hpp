#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/bench/run_channel.hpp"
#include "apps/bench/run_spec.hpp"

namespace rdmactor::bench {

/// Statistics of one run as the table and the JSON line show them.
struct run_summary {
  /// Latency percentiles in microseconds (lat mode only).
  bool has_lat = false;
  double lat_min = 0;
  double lat_p50 = 0;
  double lat_p99 = 0;
  double lat_p999 = 0;
  double lat_max = 0;
  double lat_avg = 0;
  /// Throughput (bw mode only); MB = 2^20 bytes, as perftest counts.
  bool has_bw = false;
  double bw_MBps = 0;
  double ops_per_s = 0;
  /// CPU seconds per GB (10^9 bytes) of payload, over the whole run
  /// (bw mode, when the CPU time was read).
  bool has_cpu = false;
  double cpu_s_per_GB = 0;
};

/// Computes percentiles (nearest rank) and throughput of an outcome.
run_summary summarize(const run_outcome& x, bench_mode mode);

/// Where a run's figures came from, for the headers and JSON fields.
struct run_context {
  /// "rdmactor", "caf-io" or "tcp".
  std::string impl;
  /// "soft", "verbs" or "tcp" (caf-io, tcp).
  std::string fabric;
  /// Device name ("soft0", "rxe0") or "loopback".
  std::string device;
  /// "one process" or "two processes".
  std::string topology;
  /// Value of work-stealing.aggressive-poll-attempts in this process.
  uint64_t poll_attempts = 0;
  /// The processes whose CPU time a run counts: 0 (this one) and, for a
  /// server forked by this process, its pid.
  std::vector<int> cpu_pids{0};
  /// "both sides" when `cpu_pids` cover client and server, else "client".
  std::string cpu_scope = "both sides";
};

/// The context of a baseline that talks TCP to a server process at `host`
/// (`impl`: "caf-io" or "tcp"): its CPU time counts when it is
/// `server_pid`, a process this one forked (0: a server elsewhere, only
/// the client counts).
run_context tcp_baseline_context(std::string impl, const std::string& host,
                                 int server_pid);

/// Prints runs as a perftest-like table (stdout) or as JSON lines.
class report_printer {
public:
  report_printer(bool json, run_context ctx)
      : json_(json), ctx_(std::move(ctx)) {}

  /// Prints one run; the first call of a table prints its header.
  void print(const run_spec& spec, const run_outcome& x);

  /// Closes the table (a rule line); nothing in JSON mode.
  void finish();

  const run_context& context() const noexcept {
    return ctx_;
  }

  /// Returns true when every printed run succeeded.
  bool all_ok() const noexcept {
    return ok_;
  }

private:
  void header(const run_spec& spec);

  bool json_;
  run_context ctx_;
  bool header_printed_ = false;
  bool ok_ = true;
};

/// Escapes `str` for a JSON string literal (without the quotes).
std::string json_escape(const std::string& str);

} // namespace rdmactor::bench
