#include "apps/bench/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

#include "rdmactor/error.hpp"

namespace rdmactor::bench {

run_context tcp_baseline_context(std::string impl, const std::string& host,
                                 int server_pid) {
  run_context ctx;
  ctx.impl = std::move(impl);
  ctx.fabric = "tcp";
  if (server_pid > 0)
    ctx.cpu_pids.push_back(server_pid);
  else
    ctx.cpu_scope = "client";
  ctx.device = host == "127.0.0.1" || host == "localhost" ? "loopback" : host;
  ctx.topology = "two processes";
  return ctx;
}

namespace {

constexpr double mega = 1024.0 * 1024.0;

const char* rule = "-----------------------------------------------------------"
                   "----------------------------------------";

/// Returns the nearest-rank percentile `q` (0..1) of sorted `xs`.
double percentile(const std::vector<double>& xs, double q) {
  if (xs.empty())
    return 0;
  auto rank
      = static_cast<size_t>(std::ceil(q * static_cast<double>(xs.size())));
  rank = std::clamp<size_t>(rank, 1, xs.size());
  return xs[rank - 1];
}

std::string json_number(bool present, double x, int precision) {
  if (!present || !std::isfinite(x))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", precision, x);
  return buf;
}

} // namespace

run_summary summarize(const run_outcome& x, bench_mode mode) {
  run_summary s;
  if (x.err)
    return s;
  if (mode == bench_mode::lat && !x.lat_us.empty()) {
    auto xs = x.lat_us;
    std::sort(xs.begin(), xs.end());
    s.has_lat = true;
    s.lat_min = xs.front();
    s.lat_p50 = percentile(xs, 0.50);
    s.lat_p99 = percentile(xs, 0.99);
    s.lat_p999 = percentile(xs, 0.999);
    s.lat_max = xs.back();
    s.lat_avg = std::accumulate(xs.begin(), xs.end(), 0.0)
                / static_cast<double>(xs.size());
  }
  if (mode == bench_mode::bw && x.elapsed_s > 0) {
    s.has_bw = true;
    s.bw_MBps = static_cast<double>(x.bytes) / x.elapsed_s / mega;
    s.ops_per_s = static_cast<double>(x.ops) / x.elapsed_s;
    if (x.cpu_s > 0 && x.all_bytes > 0) {
      s.has_cpu = true;
      s.cpu_s_per_GB = x.cpu_s / (static_cast<double>(x.all_bytes) / 1e9);
    }
  }
  return s;
}

std::string json_escape(const std::string& str) {
  std::string out;
  out.reserve(str.size());
  for (char c : str) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

void report_printer::header(const run_spec& spec) {
  header_printed_ = true;
  const bool lat = spec.mode == bench_mode::lat;
  const char* what = "";
  if (lat
      && (spec.op == bench_op::send || spec.op == bench_op::raw
          || spec.op == bench_op::actor))
    what = "ping-pong, half round trip";
  else if (lat)
    what = "one operation at a time, completion time";
  else
    what = "window of outstanding operations";
  std::printf("%s\n", rule);
  std::printf(" %s %s %s test (%s)\n", ctx_.impl.c_str(), to_string(spec.op),
              lat ? "latency" : "bandwidth", what);
  std::printf(" fabric %s (%s), %s\n", ctx_.fabric.c_str(), ctx_.device.c_str(),
              ctx_.topology.c_str());
  std::printf(" window %u, warmup %llu, "
              "work-stealing.aggressive-poll-attempts %llu\n",
              lat ? 1u : spec.window,
              static_cast<unsigned long long>(spec.warmup),
              static_cast<unsigned long long>(ctx_.poll_attempts));
  std::printf("%s\n", rule);
  if (lat)
    std::printf(" %-9s %-12s %-12s %-12s %-16s %-12s %-10s %-10s\n", "#bytes",
                "#iterations", "t_min[usec]", "t_max[usec]", "t_typical[usec]",
                "t_avg[usec]", "99%[usec]", "99.9%[usec]");
  else
    std::printf(" %-9s %-12s %-20s %-18s CPU[s/GB, %s]\n", "#bytes",
                "#iterations", "BW average[MB/sec]", "MsgRate[ops/sec]",
                ctx_.cpu_scope.c_str());
}

void report_printer::print(const run_spec& spec, const run_outcome& x) {
  if (x.err)
    ok_ = false;
  auto s = summarize(x, spec.mode);
  if (json_) {
    std::printf(
        "{\"impl\":\"%s\",\"op\":\"%s\",\"mode\":\"%s\",\"fabric\":\"%s\","
        "\"device\":\"%s\",\"topology\":\"%s\",\"size\":%llu,\"iters\":%llu,"
        "\"window\":%u,\"poll_attempts\":%llu,\"lat_us_p50\":%s,"
        "\"lat_us_p99\":%s,\"lat_us_p999\":%s,\"lat_us_max\":%s,"
        "\"lat_us_avg\":%s,\"bw_MBps\":%s,\"ops_per_s\":%s,\"cpu_s\":%s,"
        "\"cpu_s_per_GB\":%s,\"cpu_scope\":\"%s\"%s%s%s}\n",
        ctx_.impl.c_str(), to_string(spec.op), to_string(spec.mode),
        ctx_.fabric.c_str(), json_escape(ctx_.device).c_str(),
        ctx_.topology.c_str(), static_cast<unsigned long long>(spec.size),
        static_cast<unsigned long long>(spec.iters),
        spec.mode == bench_mode::lat ? 1u : spec.window,
        static_cast<unsigned long long>(ctx_.poll_attempts),
        json_number(s.has_lat, s.lat_p50, 3).c_str(),
        json_number(s.has_lat, s.lat_p99, 3).c_str(),
        json_number(s.has_lat, s.lat_p999, 3).c_str(),
        json_number(s.has_lat, s.lat_max, 3).c_str(),
        json_number(s.has_lat, s.lat_avg, 3).c_str(),
        json_number(s.has_bw, s.bw_MBps, 2).c_str(),
        json_number(s.has_bw, s.ops_per_s, 1).c_str(),
        json_number(!x.err && x.cpu_s > 0, x.cpu_s, 3).c_str(),
        json_number(s.has_cpu, s.cpu_s_per_GB, 3).c_str(),
        ctx_.cpu_scope.c_str(), x.err ? ",\"error\":\"" : "",
        x.err ? json_escape(render(x.err)).c_str() : "", x.err ? "\"" : "");
    std::fflush(stdout);
    return;
  }
  if (!header_printed_)
    header(spec);
  if (x.err) {
    std::printf(" %-9llu FAILED: %s\n",
                static_cast<unsigned long long>(spec.size),
                render(x.err).c_str());
  } else if (spec.mode == bench_mode::lat) {
    std::printf(" %-9llu %-12llu %-12.2f %-12.2f %-16.2f %-12.2f %-10.2f "
                "%-10.2f\n",
                static_cast<unsigned long long>(spec.size),
                static_cast<unsigned long long>(spec.iters), s.lat_min,
                s.lat_max, s.lat_p50, s.lat_avg, s.lat_p99, s.lat_p999);
  } else {
    std::printf(" %-9llu %-12llu %-20.2f %-18.0f %.2f\n",
                static_cast<unsigned long long>(spec.size),
                static_cast<unsigned long long>(spec.iters), s.bw_MBps,
                s.ops_per_s, s.cpu_s_per_GB);
  }
  std::fflush(stdout);
}

void report_printer::finish() {
  if (!json_ && header_printed_) {
    std::printf("%s\n", rule);
    std::fflush(stdout);
  }
}

} // namespace rdmactor::bench
