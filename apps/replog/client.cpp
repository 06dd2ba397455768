// rdmactor-replog's clients: --append (one entry), --status (the leader's
// status line) and --bench (appends with a window of requests in flight,
// then the latency percentiles and appends/s).

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "replog.hpp"
#include "replog_entry.hpp"

namespace replog {

namespace {

using clock = std::chrono::steady_clock;

struct bench_result {
  std::vector<double> latencies_us; ///< one per committed append
  caf::error err;                   ///< the first failure
};

struct bench_state {
  log_service log;
  uint32_t sent = 0;
  uint32_t done = 0;
  bench_result result;
  std::shared_ptr<std::promise<bench_result>> out;
  /// Sends the next append.  Lives in the state (captures only `self`), so
  /// it goes with the actor: a closure that held a shared_ptr to itself
  /// would keep the proxy and the whole connection alive forever.
  std::function<void()> send_one;
  static inline const char* name = "replog.bench";
};

/// Appends `count` values of `size` bytes with up to `window` requests in
/// flight; delivers the latencies (or the first error) to `out`.
caf::behavior bench_impl(caf::stateful_actor<bench_state>* self,
                         log_service log, uint32_t count, uint32_t size,
                         uint32_t window, std::chrono::milliseconds timeout,
                         std::shared_ptr<std::promise<bench_result>> out) {
  self->state.log = std::move(log);
  self->state.out = std::move(out);
  auto finish = [self] {
    if (!self->state.out)
      return;
    self->state.out->set_value(std::move(self->state.result));
    self->state.out.reset();
    self->quit();
  };
  self->state.send_one = [self, count, size, timeout, finish] {
    auto& st = self->state;
    auto i = st.sent++;
    std::string value(size, 'a' + static_cast<char>(i % 26));
    value.replace(0, std::min<size_t>(size, 12),
                  std::to_string(i).substr(0, std::min<size_t>(size, 12)));
    auto t0 = clock::now();
    self->request(st.log, timeout, append_atom::value, std::move(value))
        .then(
            [self, count, t0, finish](uint64_t) {
              auto& st = self->state;
              st.result.latencies_us.push_back(
                  std::chrono::duration<double, std::micro>(clock::now() - t0)
                      .count());
              if (++st.done == count)
                finish();
              else if (st.sent < count)
                st.send_one();
            },
            [self, finish](caf::error& err) {
              self->state.result.err = std::move(err);
              finish();
            });
  };
  for (uint32_t i = 0; i < std::min(window, count); ++i)
    self->state.send_one();
  return {[](caf::atom_value) {}};
}

double percentile(std::vector<double>& v, double p) {
  auto k = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

} // namespace

int run_client(caf::actor_system& sys, rdmactor::node& nd,
               const replog_config& cfg) {
  auto address = !cfg.append.empty()   ? cfg.append
                 : !cfg.status.empty() ? cfg.status
                                       : cfg.bench;
  auto fail = [](const std::string& what, const caf::error& err) {
    std::cerr << "rdmactor-replog: " << what << rdmactor::render(err)
              << std::endl;
    return 1;
  };
  auto log = nd.remote_actor<log_service>(address, service_name);
  if (!log)
    return fail("", log.error());
  // A commit may wait for a follower's WRITE and answer: allow the leader's
  // own timeouts and then some.
  auto timeout = std::chrono::milliseconds(2 * nd.opts().request_timeout_ms
                                           + cfg.commit_timeout_ms);
  caf::scoped_actor self{sys};
  int rc = 0;
  if (!cfg.append.empty()) {
    self->request(*log, timeout, append_atom::value, cfg.value)
        .receive(
            [&](uint64_t index) {
              std::cout << "committed at index " << index << std::endl;
            },
            [&](caf::error& err) { rc = fail("append: ", err); });
    return rc;
  }
  if (!cfg.status.empty()) {
    self->request(*log, timeout, status_atom::value)
        .receive([&](std::string& line) { std::cout << line << std::endl; },
                 [&](caf::error& err) { rc = fail("status: ", err); });
    return rc;
  }
  if (cfg.count == 0 || cfg.size == 0 || cfg.size > value_max_bytes
      || cfg.window == 0) {
    std::cerr << "rdmactor-replog: --bench needs --count >= 1, --window >= 1 "
                 "and --size of 1 to "
              << value_max_bytes << std::endl;
    return 2;
  }
  auto out = std::make_shared<std::promise<bench_result>>();
  auto fut = out->get_future();
  auto t0 = clock::now();
  sys.spawn(bench_impl, *log, cfg.count, cfg.size, cfg.window, timeout, out);
  auto res = fut.get();
  auto secs = std::chrono::duration<double>(clock::now() - t0).count();
  if (res.err)
    return fail("append " + std::to_string(res.latencies_us.size() + 1)
                    + " of the bench: ",
                res.err);
  auto& l = res.latencies_us;
  std::cout << cfg.count << " appends of " << cfg.size << " B committed ("
            << cfg.window << " in flight): p50 " << percentile(l, 0.5)
            << " us, p99 " << percentile(l, 0.99) << " us, "
            << static_cast<uint64_t>(cfg.count / secs) << " appends/s"
            << std::endl;
  return 0;
}

} // namespace replog
