#include "apps/bench/process_stats.hpp"

#include <cstdio>
#include <cstring>

#include <dirent.h>

namespace rdmactor::bench {

namespace {

/// Counts the entries of `dir` other than "." and "..".
uint64_t count_entries(const char* dir) {
  uint64_t n = 0;
  if (auto* d = ::opendir(dir)) {
    while (auto* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        ++n;
    ::closedir(d);
  }
  return n;
}

} // namespace

process_stats read_process_stats() {
  process_stats out;
  out.threads = count_entries("/proc/self/task");
  // The directory stream of /proc/self/fd is itself an open descriptor.
  auto fds = count_entries("/proc/self/fd");
  out.fds = fds > 0 ? fds - 1 : 0;
  if (auto* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    unsigned long long kb = 0;
    while (std::fgets(line, sizeof(line), f))
      if (std::sscanf(line, "VmRSS: %llu kB", &kb) == 1) {
        out.rss_kb = kb;
        break;
      }
    std::fclose(f);
  }
  return out;
}

} // namespace rdmactor::bench
