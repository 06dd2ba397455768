#include "apps/soak/client.hpp"

#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "apps/soak/payload.hpp"
#include "rdmactor/error.hpp"
#include "transport/soft/faults.hpp"

namespace rdmactor::soak {

namespace {

/// Regions a worker holds on the server at most.
constexpr size_t max_held = 8;

/// Operations on one connection before it is closed and replaced.
constexpr uint64_t ops_per_connection = 200;

/// Counters shared by the workers.
struct shared_counters {
  std::atomic<uint64_t> ops{0};
  std::atomic<uint64_t> verified{0};
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> faulty_connections{0};
  std::atomic<uint64_t> fault_errors{0};
  std::atomic<uint64_t> unexpected_errors{0};
  std::atomic<uint64_t> corrupt{0};
};

/// Runs one blocking request; the value or the error.
template <class T, class... Ts>
caf::expected<T> call(caf::actor_system& sys, const connection_actor& conn,
                      Ts&&... xs) {
  caf::scoped_actor self{sys};
  caf::expected<T> result{make_error(errc::internal_error, "no answer")};
  self->request(conn, op_timeout, std::forward<Ts>(xs)...)
      .receive([&](T& x) { result = std::move(x); },
               [&](caf::error& err) { result = std::move(err); });
  return result;
}

/// One worker: a connection slot and the operations it runs.
class worker {
public:
  worker(caf::actor_system& sys, node& nd, const client_config& cfg,
         shared_counters& counters, std::mutex& connect_mtx, uint64_t seed,
         uint64_t ops)
      : sys_(sys), nd_(nd), cfg_(cfg), counters_(counters),
        connect_mtx_(connect_mtx), rng_(seed), ops_(ops) {}

  void run() {
    uint64_t on_this_connection = 0;
    for (uint64_t i = 0; i < ops_; ++i) {
      // Connections come and go: a fresh one (maybe with a fault plan)
      // every ops_per_connection operations.
      if (conn_ && on_this_connection >= ops_per_connection)
        disconnect();
      if (!conn_) {
        if (!connect())
          continue;
        on_this_connection = 0;
      }
      auto err = step();
      ++counters_.ops;
      ++on_this_connection;
      if (err)
        on_error(err);
    }
    disconnect();
  }

private:
  uint64_t pick(uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>{lo, hi}(rng_);
  }

  uint32_t pick_size() {
    // Mostly small, sometimes up to the maximum.
    if (pick(0, 3) != 0)
      return static_cast<uint32_t>(pick(payload_header_bytes, 4096));
    return static_cast<uint32_t>(pick(payload_header_bytes, cfg_.max_bytes));
  }

  bool connect() {
    std::lock_guard<std::mutex> guard{connect_mtx_};
    auto& dev = *nd_.device();
    transport::soft::fault_plan plan;
    faulty_ = std::string{dev.kind()} == "soft"
              && std::bernoulli_distribution{cfg_.fault_rate}(rng_);
    if (faulty_) {
      auto kind = cfg_.fault_kind == "drop"      ? 0
                  : cfg_.fault_kind == "corrupt" ? 1
                  : cfg_.fault_kind == "delay"   ? 2
                                                 : pick(0, 2);
      switch (kind) {
        case 0:
          plan.drop_after_bytes = pick(0, uint64_t{cfg_.max_bytes});
          break;
        case 1:
          plan.corrupt_frame = pick(1, 200);
          break;
        default:
          plan.delay = std::chrono::milliseconds(pick(1, 30));
      }
      transport::soft::set_faults(dev, plan);
    }
    auto c = nd_.connect(cfg_.target);
    if (faulty_)
      transport::soft::set_faults(dev, {});
    if (!c) {
      ++counters_.unexpected_errors;
      std::cerr << "rdmactor-soak: connect: " << render(c.error()) << "\n";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return false;
    }
    conn_ = *c;
    ++counters_.connections;
    if (faulty_)
      ++counters_.faulty_connections;
    return true;
  }

  void disconnect() {
    held_.clear();
    if (conn_)
      caf::anon_send_exit(conn_, caf::exit_reason::user_shutdown);
    conn_ = connection_actor{};
  }

  void on_error(const caf::error& err) {
    if (faulty_) {
      ++counters_.fault_errors;
    } else {
      ++counters_.unexpected_errors;
      std::cerr << "rdmactor-soak: unexpected error: " << render(err) << "\n";
    }
    disconnect();
  }

  caf::expected<local_mr> payload(uint32_t len) {
    auto mr = call<local_mr>(sys_, conn_, alloc_local_mr_atom::value,
                             uint64_t{len}, uint64_t{64});
    if (mr)
      write_payload(mr->data(), len, rng_());
    return mr;
  }

  /// Runs one random operation; returns its error, if any.
  caf::error step() {
    switch (pick(0, 6)) {
      case 0: { // allocate on the server
        if (held_.size() >= max_held)
          return release_one();
        auto r = call<remote_mr>(sys_, conn_, request_remote_mr_atom::value,
                                 uint64_t{pick_size()}, uint64_t{64});
        if (!r)
          return r.error();
        held_.push_back(*r);
        return {};
      }
      case 1: // write, read back, compare
        return write_read();
      case 2: { // send_data
        auto mr = payload(pick_size());
        if (!mr)
          return mr.error();
        auto n = call<uint64_t>(sys_, conn_, send_data_atom::value, *mr);
        return n ? caf::error{} : n.error();
      }
      case 3: { // lend a region; the server reads it and releases it
        auto mr = payload(pick_size());
        if (!mr)
          return mr.error();
        auto t = call<mr_token>(sys_, conn_, send_mr_atom::value, *mr);
        return t ? caf::error{} : t.error();
      }
      case 4: // hand a region back to the server
        return hand_back();
      case 5:
        return release_one();
      default: { // allocate locally and drop
        auto mr = payload(pick_size());
        return mr ? caf::error{} : mr.error();
      }
    }
  }

  caf::error write_read() {
    if (held_.empty())
      return {};
    auto& dst = held_[pick(0, held_.size() - 1)];
    auto len = static_cast<uint32_t>(dst.size());
    if (len < payload_header_bytes)
      return {};
    auto src = payload(len);
    if (!src)
      return src.error();
    auto w = call<uint64_t>(sys_, conn_, write_atom::value, *src, dst);
    if (!w)
      return w.error();
    auto back = call<local_mr>(sys_, conn_, alloc_local_mr_atom::value,
                               uint64_t{len}, uint64_t{64});
    if (!back)
      return back.error();
    auto r = call<uint64_t>(sys_, conn_, read_atom::value, *back, dst);
    if (!r)
      return r.error();
    if (std::memcmp(back->data(), src->data(), len) != 0
        || !check_payload(back->data(), len))
      ++counters_.corrupt;
    else
      ++counters_.verified;
    return {};
  }

  caf::error hand_back() {
    if (held_.empty())
      return {};
    auto i = pick(0, held_.size() - 1);
    auto rmr = held_[i];
    held_.erase(held_.begin() + static_cast<long>(i));
    auto len = static_cast<uint32_t>(rmr.size());
    if (len < payload_header_bytes)
      return {};
    auto src = payload(len);
    if (!src)
      return src.error();
    auto w = call<uint64_t>(sys_, conn_, write_atom::value, *src, rmr);
    if (!w)
      return w.error();
    auto t = call<mr_token>(sys_, conn_, send_mr_atom::value, rmr);
    return t ? caf::error{} : t.error();
  }

  caf::error release_one() {
    if (held_.empty())
      return {};
    auto rmr = held_.back();
    held_.pop_back();
    auto n = call<uint64_t>(sys_, conn_, release_atom::value, rmr);
    return n ? caf::error{} : n.error();
  }

  caf::actor_system& sys_;
  node& nd_;
  const client_config& cfg_;
  shared_counters& counters_;
  std::mutex& connect_mtx_;
  std::mt19937_64 rng_;
  uint64_t ops_;
  connection_actor conn_;
  bool faulty_ = false;
  std::vector<remote_mr> held_;
};

} // namespace

client_report run_client(caf::actor_system& sys, node& nd,
                         const client_config& cfg) {
  shared_counters counters;
  std::mutex connect_mtx;
  std::vector<std::thread> threads;
  auto n = std::max<uint32_t>(cfg.connections, 1);
  for (uint32_t i = 0; i < n; ++i) {
    auto ops = cfg.ops / n + (i < cfg.ops % n ? 1 : 0);
    threads.emplace_back([&, i, ops] {
      worker w{sys, nd, cfg, counters, connect_mtx, cfg.seed * 1000 + i, ops};
      w.run();
    });
  }
  for (auto& t : threads)
    t.join();
  // Every connection is closed; wait for the memory to come back.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (nd.memory_stats().bytes_in_use != 0
         && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  client_report rep;
  rep.ops = counters.ops;
  rep.verified = counters.verified;
  rep.connections = counters.connections;
  rep.faulty_connections = counters.faulty_connections;
  rep.fault_errors = counters.fault_errors;
  rep.unexpected_errors = counters.unexpected_errors;
  rep.corrupt = counters.corrupt;
  rep.bytes_in_use_after = nd.memory_stats().bytes_in_use;
  return rep;
}

} // namespace rdmactor::soak
