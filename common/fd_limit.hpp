#pragma once

#include <cstdint>
#include <string>

namespace rdmactor {

/// The process's open-files limit (RLIMIT_NOFILE) before and after
/// `raise_open_files_limit`.
struct open_files_limit {
  /// The soft limit found.
  uint64_t before = 0;
  /// The soft limit now (equal to `before` when nothing changed).
  uint64_t after = 0;
  /// The hard limit (the ceiling an unprivileged process may raise to).
  uint64_t hard = 0;
};

/// Raises the soft RLIMIT_NOFILE of this process to min(hard limit, `want`),
/// as servers do: the default soft limit of 1024 would otherwise cap a node
/// at about a thousand soft-fabric connections.  Never lowers a limit.
/// Caller: `node::open` (options::open_files_limit), any thread.
open_files_limit raise_open_files_limit(uint64_t want) noexcept;

/// Returns what to tell a user when a call failed with `err`: for EMFILE
/// and ENFILE the limit that was hit and how to raise it; otherwise
/// `strerror(err)`.
std::string describe_fd_error(int err);

} // namespace rdmactor
