#include "apps/bench/run_channel.hpp"

#include <algorithm>
#include <cstdio>

#include <unistd.h>

#include "rdmactor/error.hpp"

namespace rdmactor::bench {

run_outcome wait_for_run(run_channel& chan, const std::string& label,
                         std::chrono::milliseconds limit) {
  using clock = std::chrono::steady_clock;
  auto fut = chan.outcome();
  auto start = clock::now();
  auto deadline = start + limit;
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  auto next_report = start + std::chrono::seconds(2);
  bool reported = false;
  for (;;) {
    if (fut.wait_for(std::chrono::milliseconds(200))
        == std::future_status::ready)
      break;
    auto now = clock::now();
    if (now >= deadline) {
      chan.fail(make_error(errc::request_timeout,
                           label + ": no result within "
                               + std::to_string(limit.count()) + " ms"));
      break;
    }
    if (now >= next_report) {
      auto secs = std::chrono::duration<double>(now - start).count();
      std::fprintf(stderr, "%s[%s] %llu/%llu ops, %.0f s%s", tty ? "\r" : "",
                   label.c_str(),
                   static_cast<unsigned long long>(chan.progress()),
                   static_cast<unsigned long long>(chan.total()), secs,
                   tty ? "   " : "\n");
      std::fflush(stderr);
      reported = true;
      next_report = now + std::chrono::seconds(tty ? 1 : 5);
    }
  }
  if (reported && tty) {
    std::fprintf(stderr, "\r%*s\r", 72, "");
    std::fflush(stderr);
  }
  return fut.get();
}

run_outcome combine_lanes(std::vector<run_outcome> lanes) {
  run_outcome all;
  for (auto& x : lanes) {
    if (x.err) {
      if (!all.err)
        all.err = std::move(x.err);
      continue;
    }
    all.ops += x.ops;
    all.bytes += x.bytes;
    all.elapsed_s = std::max(all.elapsed_s, x.elapsed_s);
    all.lat_us.insert(all.lat_us.end(), x.lat_us.begin(), x.lat_us.end());
  }
  return all;
}

} // namespace rdmactor::bench
