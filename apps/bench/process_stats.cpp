#include "apps/bench/process_stats.hpp"

#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

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

double cpu_seconds(int pid) {
  if (pid == 0) {
    // Microseconds, where /proc/PID/stat counts clock ticks (10 ms).
    rusage ru{};
    if (::getrusage(RUSAGE_SELF, &ru) != 0)
      return 0;
    auto sec = [](const timeval& tv) {
      return static_cast<double>(tv.tv_sec)
             + static_cast<double>(tv.tv_usec) * 1e-6;
    };
    return sec(ru.ru_utime) + sec(ru.ru_stime);
  }
  auto path = pid == 0 ? std::string{"/proc/self/stat"}
                       : "/proc/" + std::to_string(pid) + "/stat";
  auto* f = std::fopen(path.c_str(), "r");
  if (!f)
    return 0;
  char buf[1024];
  auto n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // Fields after the command name (which may hold spaces, so start after
  // its closing parenthesis): state is field 3, utime 14 and stime 15.
  const char* p = std::strrchr(buf, ')');
  unsigned long long utime = 0;
  unsigned long long stime = 0;
  if (!p
      || std::sscanf(p + 1,
                     " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                     &utime, &stime)
             != 2)
    return 0;
  auto ticks = ::sysconf(_SC_CLK_TCK);
  return ticks > 0
             ? static_cast<double>(utime + stime) / static_cast<double>(ticks)
             : 0;
}

double thread_cpu_seconds() {
  timespec ts{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return 0;
  return static_cast<double>(ts.tv_sec)
         + static_cast<double>(ts.tv_nsec) * 1e-9;
}

} // namespace rdmactor::bench
