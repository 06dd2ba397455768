#include "apps/bench/scale_runner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include <caf/actor_cast.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "apps/bench/process_stats.hpp"
#include "apps/bench/run_spec.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor::bench {

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0)
      .count();
}

/// Nearest-rank percentile of sorted `xs` (0 when empty).
double percentile(const std::vector<double>& xs, double p) {
  if (xs.empty())
    return 0;
  auto rank = static_cast<size_t>(p * static_cast<double>(xs.size()) + 0.999);
  return xs[std::clamp<size_t>(rank, 1, xs.size()) - 1];
}

/// What `--op=connect` measured.
struct connect_outcome {
  uint32_t connected = 0;
  std::vector<double> connect_ms;
  double connect_s_total = 0;
  process_stats before;
  process_stats holding;
  uint64_t registered_before = 0;
  uint64_t registered_holding = 0;
  uint64_t echoes = 0;
  double echo_ms_total = 0;
  /// CPU time of this process while it held the idle connections, in
  /// percent of one core (user + system, every thread).
  double hold_cpu_percent = 0;
  caf::error err;
};

void progress(uint32_t done, uint32_t total, const char* what) {
  if (total >= 20 && done % (total / 10) == 0)
    std::fprintf(stderr, "rdmactor-bench: %s %u/%u\n", what, done, total);
}

/// Opens `total` connections to `addr` from `threads` threads at once
/// (node::connect is thread-safe), each recording its connect times; stops
/// at the first error.
void connect_all(node& client, const std::string& addr, uint32_t total,
                 uint32_t threads, std::vector<connection_actor>& conns,
                 connect_outcome& x) {
  std::mutex mtx;
  std::atomic<uint32_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (;;) {
      auto i = next.fetch_add(1);
      if (i >= total || failed.load())
        return;
      auto t0 = clock_type::now();
      auto conn = client.connect(addr);
      auto ms = ms_since(t0);
      std::lock_guard<std::mutex> guard{mtx};
      if (!conn) {
        if (!failed.exchange(true))
          x.err = make_error(code_of(conn.error()),
                             "connection " + std::to_string(i + 1) + " of "
                                 + std::to_string(total)
                                 + " failed: " + what_of(conn.error()));
        return;
      }
      x.connect_ms.push_back(ms);
      conns.push_back(std::move(*conn));
      progress(static_cast<uint32_t>(conns.size()), total, "connected");
    }
  };
  std::vector<std::thread> pool;
  for (uint32_t t = 1; t < threads; ++t)
    pool.emplace_back(work);
  work();
  for (auto& t : pool)
    t.join();
}

/// Echoes outstanding at most in `echo_on_each`: well under the shared
/// receive queue's cap (srq-max-receives, 16384), which a burst on 19,000
/// connections at once outgrew on both ends (each end's echoes held its
/// receives while the other's waited: an RNR failure after 2 s).
constexpr size_t echo_window = 4096;

/// Sends 8 bytes flagged `echo_flag` on every connection and waits until
/// each echo came back (pushed to `self` as its data subscriber).  The
/// subscriptions go out without waiting for their answers, the sends with
/// at most `echo_window` echoes outstanding, and answers and echoes are
/// taken as they come: a client that waited for each answer in turn would
/// leave the echoes unread in its mailbox, and with a shared receive queue
/// the echoes nobody reads hold its receives.
void echo_on_each(caf::actor_system& sys, node& client,
                  const std::vector<connection_actor>& conns,
                  std::chrono::milliseconds timeout, connect_outcome& x) {
  auto t0 = clock_type::now();
  auto chunk = client.pool()->allocate(8, 64, transport::access::all);
  if (!chunk) {
    x.err = chunk.error();
    return;
  }
  chunk->data()[0] = echo_flag;
  caf::scoped_actor self{sys};
  auto sub = caf::actor_cast<data_subscriber>(self);
  for (auto& conn : conns)
    self->send(conn, subscribe_data_atom::value, sub);
  size_t sent = 0;
  auto send_next = [&] {
    if (sent < conns.size())
      self->send(conns[sent++], send_data_atom::value, *chunk);
  };
  while (sent < std::min(conns.size(), echo_window))
    send_next();
  // Two answers (subscribed, sent) and one echo per connection.
  size_t answers = 0;
  bool late = false;
  caf::error err;
  self->receive_while([&] {
    return !late && !err
           && (answers < 2 * conns.size() || x.echoes < conns.size());
  })(
      [&](data_atom, local_mr&) {
        ++x.echoes;
        send_next();
      },
      [&](uint64_t) { ++answers; }, [&](caf::error& e) { err = std::move(e); },
      caf::after(timeout) >> [&] { late = true; });
  if (err) {
    x.err = std::move(err);
    return;
  }
  x.echo_ms_total = ms_since(t0);
  if (late || x.echoes < conns.size())
    x.err = make_error(errc::request_timeout,
                       std::to_string(conns.size() - x.echoes) + " of "
                           + std::to_string(conns.size())
                           + " echoes did not come back within "
                           + std::to_string(timeout.count()) + " ms");
}

void print(const bench_plan& plan, const run_context& ctx,
           const connect_outcome& x) {
  auto sorted = x.connect_ms;
  std::sort(sorted.begin(), sorted.end());
  auto p50 = percentile(sorted, 0.50);
  auto p99 = percentile(sorted, 0.99);
  auto max = sorted.empty() ? 0.0 : sorted.back();
  auto per_peer = [&](uint64_t holding, uint64_t before) {
    return x.connected == 0 || holding < before
               ? 0.0
               : static_cast<double>(holding - before) / x.connected;
  };
  if (plan.json) {
    std::printf(
        "{\"impl\":\"%s\",\"op\":\"connect\",\"fabric\":\"%s\","
        "\"device\":\"%s\",\"topology\":\"%s\",\"peers\":%u,"
        "\"connect_threads\":%u,\"connected\":%u,\"connect_ms_p50\":%.3f,"
        "\"connect_ms_p99\":%.3f,"
        "\"connect_ms_max\":%.3f,\"connect_s_total\":%.3f,\"threads\":%llu,"
        "\"rss_kb\":%llu,\"registered_bytes\":%llu,\"fds\":%llu,"
        "\"threads_before\":%llu,\"rss_kb_before\":%llu,"
        "\"registered_bytes_before\":%llu,\"fds_before\":%llu,"
        "\"echoes\":%llu,\"echo_ms_total\":%.3f,\"hold_ms\":%u,"
        "\"hold_cpu_percent\":%.2f,\"status\":\"%s\"%s%s%s}\n",
        ctx.impl.c_str(), ctx.fabric.c_str(), json_escape(ctx.device).c_str(),
        ctx.topology.c_str(), plan.peers, plan.connect_threads, x.connected,
        p50, p99, max, x.connect_s_total,
        static_cast<unsigned long long>(x.holding.threads),
        static_cast<unsigned long long>(x.holding.rss_kb),
        static_cast<unsigned long long>(x.registered_holding),
        static_cast<unsigned long long>(x.holding.fds),
        static_cast<unsigned long long>(x.before.threads),
        static_cast<unsigned long long>(x.before.rss_kb),
        static_cast<unsigned long long>(x.registered_before),
        static_cast<unsigned long long>(x.before.fds),
        static_cast<unsigned long long>(x.echoes), x.echo_ms_total,
        plan.hold_ms, x.hold_cpu_percent, x.err ? "error" : "ok",
        x.err ? ",\"error\":\"" : "",
        x.err ? json_escape(render(x.err)).c_str() : "", x.err ? "\"" : "");
    std::fflush(stdout);
    return;
  }
  std::printf("-------------------------------------------------------------"
              "------------------\n");
  std::printf(" %s connect test (%s, %s), %s\n", ctx.impl.c_str(),
              ctx.fabric.c_str(), ctx.device.c_str(), ctx.topology.c_str());
  std::printf("-------------------------------------------------------------"
              "------------------\n");
  std::printf(" peers %u connected %u in %.3f s by %u thread(s); connect ms "
              "p50 %.3f p99 %.3f max %.3f\n",
              plan.peers, x.connected, x.connect_s_total, plan.connect_threads,
              p50, p99, max);
  std::printf(" %-18s %-14s %-14s %-14s\n", "this process", "before", "holding",
              "per peer");
  std::printf(" %-18s %-14llu %-14llu %-14.2f\n", "threads",
              static_cast<unsigned long long>(x.before.threads),
              static_cast<unsigned long long>(x.holding.threads),
              per_peer(x.holding.threads, x.before.threads));
  std::printf(" %-18s %-14llu %-14llu %-14.1f\n", "rss KiB",
              static_cast<unsigned long long>(x.before.rss_kb),
              static_cast<unsigned long long>(x.holding.rss_kb),
              per_peer(x.holding.rss_kb, x.before.rss_kb));
  std::printf(" %-18s %-14llu %-14llu %-14.0f\n", "registered bytes",
              static_cast<unsigned long long>(x.registered_before),
              static_cast<unsigned long long>(x.registered_holding),
              per_peer(x.registered_holding, x.registered_before));
  std::printf(" %-18s %-14llu %-14llu %-14.2f\n", "fds",
              static_cast<unsigned long long>(x.before.fds),
              static_cast<unsigned long long>(x.holding.fds),
              per_peer(x.holding.fds, x.before.fds));
  std::printf(" idle CPU while holding %u ms: %.2f %% of a core\n",
              plan.hold_ms, x.hold_cpu_percent);
  std::printf(" echoes %llu of %u in %.1f ms\n",
              static_cast<unsigned long long>(x.echoes), x.connected,
              x.echo_ms_total);
  if (x.err)
    std::printf(" FAILED: %s\n", render(x.err).c_str());
  std::printf("-------------------------------------------------------------"
              "------------------\n");
  std::fflush(stdout);
}

} // namespace

int run_connect(caf::actor_system& sys, const bench_plan& plan, node& client,
                const std::string& addr, const run_context& ctx) {
  connect_outcome x;
  x.before = read_process_stats();
  x.registered_before = client.device()->registered_bytes();
  std::vector<connection_actor> conns;
  conns.reserve(plan.peers);
  auto t0 = clock_type::now();
  connect_all(client, addr, plan.peers, plan.connect_threads, conns, x);
  x.connect_s_total = ms_since(t0) / 1000.0;
  x.connected = static_cast<uint32_t>(conns.size());
  auto cpu0 = cpu_seconds();
  auto hold0 = clock_type::now();
  std::this_thread::sleep_for(std::chrono::milliseconds{plan.hold_ms});
  auto held_ms = ms_since(hold0);
  if (held_ms > 0)
    x.hold_cpu_percent = (cpu_seconds() - cpu0) * 1e5 / held_ms;
  x.holding = read_process_stats();
  x.registered_holding = client.device()->registered_bytes();
  if (!x.err)
    echo_on_each(sys, client, conns, plan.op_timeout, x);
  for (auto& conn : conns)
    caf::anon_send_exit(conn, caf::exit_reason::user_shutdown);
  conns.clear();
  print(plan, ctx, x);
  return x.err ? 1 : 0;
}

caf::expected<std::vector<connection_actor>>
open_idle_peers(node& client, const std::string& addr, uint32_t n) {
  std::vector<connection_actor> conns;
  conns.reserve(n);
  connect_outcome x;
  connect_all(client, addr, n, 1, conns, x);
  if (x.err)
    return std::move(x.err);
  return conns;
}

} // namespace rdmactor::bench
