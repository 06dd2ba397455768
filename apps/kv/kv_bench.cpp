// rdmactor-kv --bench: many clients getting random keys at once, every
// value checked, latency percentiles and gets/s on the last line.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>

#include "kv_client.hpp"
#include "kv_service.hpp"

namespace kv {

namespace {

using clock_type = std::chrono::steady_clock;

/// The bench's key number `i`.
std::string bench_key(uint32_t i) {
  return "bench-" + std::to_string(i);
}

/// A value that names its key and generation and whose filler and length
/// follow from them, so that a reader can tell a well-formed value from a
/// torn or misplaced one: "KEY/GEN/" + N times one letter.
std::string bench_value(const std::string& key, uint64_t gen) {
  auto h = fnv1a(key.data(), key.size()) + gen;
  auto v = key + "/" + std::to_string(gen) + "/";
  auto filler = 20 + h % 150;
  v.append(std::min<size_t>(filler, value_max_bytes - v.size()),
           static_cast<char>('a' + h % 26));
  return v;
}

/// Whether `value` is a well-formed bench value of `key`.
bool well_formed(const std::string& key, const std::string& value) {
  auto prefix = key + "/";
  if (value.compare(0, prefix.size(), prefix) != 0)
    return false;
  auto slash = value.find('/', prefix.size());
  if (slash == std::string::npos)
    return false;
  uint64_t gen = 0;
  try {
    gen = std::stoull(value.substr(prefix.size(), slash - prefix.size()));
  } catch (...) {
    return false;
  }
  return value == bench_value(key, gen);
}

struct totals {
  std::mutex mtx;
  std::vector<double> lat_us;
  uint64_t gets = 0;
  uint64_t missing = 0;
  uint64_t wrong = 0;
  uint64_t retries = 0;
  uint64_t errors = 0;
  uint64_t puts = 0;
  std::string first_error;

  void error(const caf::error& err) {
    std::lock_guard<std::mutex> guard{mtx};
    if (errors++ == 0)
      first_error = rdmactor::render(err);
  }
};

/// Splits "HOST:PORT" into host and port; false when it does not parse.
bool split_host_port(const std::string& hp, std::string* host, uint16_t* port) {
  auto colon = hp.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return false;
  try {
    auto p = std::stoul(hp.substr(colon + 1));
    if (p == 0 || p > 65535)
      return false;
    *port = static_cast<uint16_t>(p);
  } catch (...) {
    return false;
  }
  *host = hp.substr(0, colon);
  return true;
}

/// One bench connection to the server, as `--via` says: rdma (the sample's
/// client: one-sided gets), actor (the same connection, gets as requests
/// to the "kv" actor), caf-io (CAF io's remote_actor at `--bench`, the
/// server's `--caf-io` address; CAF io shares one TCP connection per
/// process).
caf::expected<std::unique_ptr<store>>
open_store(caf::actor_system& sys, rdmactor::node& nd, const kv_config& cfg) {
  auto timeout = std::chrono::milliseconds(nd.opts().request_timeout_ms);
  if (cfg.via == "caf-io") {
    std::string host;
    uint16_t port = 0;
    if (!split_host_port(cfg.bench, &host, &port))
      return rdmactor::make_error(rdmactor::errc::invalid_address,
                                  "--bench=" + cfg.bench + " is not HOST:PORT");
    auto svc = sys.middleman().remote_actor<service>(host, port);
    if (!svc)
      return rdmactor::make_error(
          rdmactor::errc::connect_failed,
          "CAF io: no kv actor at " + cfg.bench + ": " + sys.render(svc.error())
              + "; start the server with --caf-io=HOST:PORT");
    return std::unique_ptr<store>{
        new actor_store(sys, std::move(*svc), timeout, nullptr)};
  }
  auto c = client::open(sys, nd, cfg.bench, cfg.retries);
  if (!c)
    return std::move(c.error());
  if (cfg.via == "rdma")
    return std::unique_ptr<store>{std::move(*c)};
  auto svc = (*c)->actor();
  return std::unique_ptr<store>{
      new actor_store(sys, std::move(svc), timeout, std::move(*c))};
}

} // namespace

int run_bench(caf::actor_system& sys, rdmactor::node& nd,
              const kv_config& cfg) {
  if (cfg.clients == 0 || cfg.keys == 0 || cfg.seconds == 0) {
    std::cerr << "rdmactor-kv: --clients, --keys and --seconds must be at "
                 "least 1\n";
    return 2;
  }
  // Fill the table: one put per key, generation 0.
  {
    auto c = open_store(sys, nd, cfg);
    if (!c) {
      std::cerr << "rdmactor-kv: " << rdmactor::render(c.error()) << "\n";
      return 1;
    }
    for (uint32_t i = 0; i < cfg.keys; ++i) {
      auto key = bench_key(i);
      if (auto v = (*c)->put(key, bench_value(key, 0)); !v) {
        std::cerr << "rdmactor-kv: filling the table: put " << key << ": "
                  << rdmactor::render(v.error()) << "\n";
        return 1;
      }
    }
    std::cout << "filled " << cfg.keys << " keys" << std::endl;
  }
  totals tot;
  std::atomic<bool> stop{false};
  std::atomic<uint32_t> ready{0};
  auto reader = [&](uint32_t idx) {
    auto c = open_store(sys, nd, cfg);
    ready.fetch_add(1);
    if (!c) {
      tot.error(c.error());
      return;
    }
    std::mt19937_64 rng{idx * 7919 + 1};
    std::vector<double> lat;
    uint64_t gets = 0, missing = 0, wrong = 0, retries = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      auto key = bench_key(static_cast<uint32_t>(rng() % cfg.keys));
      auto t0 = clock_type::now();
      auto r = (*c)->get(key);
      auto t1 = clock_type::now();
      if (!r) {
        tot.error(r.error());
        break;
      }
      lat.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      ++gets;
      retries += r->retries;
      if (!r->found)
        ++missing;
      else if (!well_formed(key, r->value))
        ++wrong;
    }
    std::lock_guard<std::mutex> guard{tot.mtx};
    tot.lat_us.insert(tot.lat_us.end(), lat.begin(), lat.end());
    tot.gets += gets;
    tot.missing += missing;
    tot.wrong += wrong;
    tot.retries += retries;
  };
  auto writer = [&](uint32_t idx) {
    auto c = open_store(sys, nd, cfg);
    ready.fetch_add(1);
    if (!c) {
      tot.error(c.error());
      return;
    }
    std::mt19937_64 rng{idx * 104729 + 3};
    uint64_t puts = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      auto key = bench_key(static_cast<uint32_t>(rng() % cfg.keys));
      if (auto v = (*c)->put(key, bench_value(key, rng() % 1000000)); !v) {
        tot.error(v.error());
        break;
      }
      ++puts;
    }
    std::lock_guard<std::mutex> guard{tot.mtx};
    tot.puts += puts;
  };
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < cfg.clients; ++i)
    threads.emplace_back(reader, i);
  for (uint32_t i = 0; i < cfg.writers; ++i)
    threads.emplace_back(writer, i);
  // The clock starts once every client connected (or failed to).
  while (ready.load() < cfg.clients + cfg.writers)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto t0 = clock_type::now();
  std::this_thread::sleep_for(std::chrono::seconds(cfg.seconds));
  stop = true;
  for (auto& t : threads)
    t.join();
  auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  std::cout << "gets " << tot.gets << ", missing " << tot.missing << ", wrong "
            << tot.wrong << ", retries " << tot.retries
            << " (reads that raced a put), puts " << tot.puts << ", errors "
            << tot.errors << std::endl;
  if (tot.errors > 0)
    std::cout << "first error: " << tot.first_error << std::endl;
  auto& l = tot.lat_us;
  std::sort(l.begin(), l.end());
  auto pct = [&](double q) {
    if (l.empty())
      return 0.0;
    auto i = static_cast<size_t>(q * static_cast<double>(l.size() - 1));
    return l[i];
  };
  char line[256];
  std::snprintf(line, sizeof(line),
                "kv bench (%s gets, %s): %" PRIu32 " clients, %" PRIu32
                " writers, %.1f s: p50 %.1f us, p99 %.1f us, %.0f gets/s",
                cfg.via == "rdma"    ? "one-sided RDMA READ"
                : cfg.via == "actor" ? "rdmactor actor request"
                                     : "CAF io actor request",
                cfg.via == "caf-io" ? "tcp" : nd.device()->kind(), cfg.clients,
                cfg.writers, secs, pct(0.50), pct(0.99),
                static_cast<double>(tot.gets) / secs);
  std::cout << line << std::endl;
  return tot.errors == 0 && tot.missing == 0 && tot.wrong == 0 && tot.gets > 0
             ? 0
             : 1;
}

} // namespace kv
