#include "actors/connection/keepalive_timer.hpp"

#include <algorithm>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include "common/thread_name.hpp"
#include "common/tuning.hpp"
#include "rdmactor/detail/transport_atoms.hpp"

namespace rdmactor {

keepalive_timer& keepalive_timer::instance() {
  static keepalive_timer timer;
  return timer;
}

keepalive_timer::keepalive_timer()
    : queue_(std::chrono::milliseconds{tuning::keepalive_min_tick_ms}) {}

keepalive_timer::clock_type::duration
keepalive_timer::tick_for(clock_type::duration silence) noexcept {
  return std::clamp<clock_type::duration>(
      silence / tuning::keepalive_ticks_per_period,
      std::chrono::milliseconds{tuning::keepalive_min_tick_ms},
      std::chrono::milliseconds{tuning::keepalive_max_tick_ms});
}

keepalive_timer::~keepalive_timer() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void keepalive_timer::schedule(caf::weak_actor_ptr agent, time_point at,
                               node_liveness_ptr group,
                               clock_type::duration silence,
                               clock_type::duration period) {
  bool wake;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stop_)
      return;
    if (!thread_.joinable())
      thread_ = std::thread{[this] { run(); }};
    wake
        = queue_.add(entry{std::move(agent), std::move(group), silence, period},
                     decltype(queue_)::round_up(at, tick_for(silence)));
  }
  if (wake)
    cv_.notify_one();
}

size_t keepalive_timer::waiting() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return queue_.size();
}

void keepalive_timer::run() {
  name_this_thread("rdm.keepalive");
  std::vector<entry> due;
  std::vector<caf::weak_actor_ptr> wake;
  std::unique_lock<std::mutex> lock{mtx_};
  while (!stop_) {
    auto next = queue_.next();
    if (next == time_point::max())
      cv_.wait(lock);
    else
      cv_.wait_until(lock, next);
    if (stop_)
      break;
    auto now = clock_type::now();
    queue_.take_due(now, due);
    for (auto& e : due) {
      // An agent nobody holds any more is gone (or going): drop it.
      if (!e.agent || e.agent.get()->strong_refs.load() == 0)
        continue;
      if (e.group) {
        auto plan = e.group->check(now, e.silence, e.period, e.agent.get());
        if (!plan.wake) {
          auto tick = tick_for(e.silence);
          queue_.add(std::move(e), decltype(queue_)::round_up(plan.at, tick));
          continue;
        }
      }
      wake.push_back(std::move(e.agent));
    }
    due.clear();
    if (wake.empty())
      continue;
    lock.unlock();
    // Outside the lock: a send may run the agent's scheduling.
    for (auto& weak : wake)
      if (auto strong = weak.lock())
        caf::anon_send(caf::actor_cast<caf::actor>(strong),
                       transport::tick_atom::value);
    wake.clear();
    lock.lock();
  }
}

} // namespace rdmactor
