#pragma once

#include <cstdint>
#include <string>

namespace rdmactor::bench {

/// What this process costs right now, from /proc/self (Linux).
struct process_stats {
  /// Threads of the process (/proc/self/task entries).
  uint64_t threads = 0;
  /// Resident set size in KiB (VmRSS).
  uint64_t rss_kb = 0;
  /// Open file descriptors (/proc/self/fd entries).
  uint64_t fds = 0;
};

/// Reads the figures of this process; fields it cannot read stay 0.
process_stats read_process_stats();

/// CPU time (user + system, all threads) of process `pid` so far, in
/// seconds, from /proc/PID/stat; `pid` 0 is this process.  0 when it
/// cannot be read (a process that is gone).
double cpu_seconds(int pid = 0);

/// CPU time of the calling thread so far, in seconds
/// (CLOCK_THREAD_CPUTIME_ID): what a monitoring loop subtracts so that it
/// does not count itself (reading /proc/self/fd with thousands of sockets
/// costs more than the idle connections it watches).
double thread_cpu_seconds();

} // namespace rdmactor::bench
