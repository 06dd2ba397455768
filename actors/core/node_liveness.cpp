// The keepalive state shared by the connections of a node to one peer node
// (actors/core/node_liveness.hpp).

#include "actors/core/node_liveness.hpp"

#include <algorithm>
#include <iterator>

namespace rdmactor {

// -- node_liveness ------------------------------------------------------------

void node_liveness::heard(time_point now) noexcept {
  auto ms = to_ms(now);
  auto cur = heard_ms_.load(std::memory_order_relaxed);
  while (
      ms > cur
      && !heard_ms_.compare_exchange_weak(cur, ms, std::memory_order_relaxed)) {
  }
}

void node_liveness::withdraw_ping(time_point at) noexcept {
  auto ms = to_ms(at);
  ping_ms_.compare_exchange_strong(ms, 0, std::memory_order_relaxed);
}

std::optional<node_liveness::time_point>
node_liveness::unanswered_ping() const noexcept {
  auto ping = ping_ms_.load(std::memory_order_relaxed);
  if (ping == 0 || heard_ms_.load(std::memory_order_relaxed) >= ping)
    return std::nullopt;
  return from_ms(ping);
}

node_liveness::plan node_liveness::check(time_point now, duration silence,
                                         duration period,
                                         const void* who) noexcept {
  auto heard = last_heard();
  if (heard + silence > now)
    return {false, heard + silence};
  if (auto ping = unanswered_ping()) {
    if (*ping + period > now)
      return {false, *ping + period};
    return {true, now}; // silent for a period after a Ping: dead
  }
  auto woken = from_ms(woken_ms_.load(std::memory_order_relaxed));
  if (woken > heard && woken + period > now
      && woken_.load(std::memory_order_relaxed) != who)
    return {false, woken + period}; // another check went to ping
  woken_.store(who, std::memory_order_relaxed);
  woken_ms_.store(to_ms(now), std::memory_order_relaxed);
  return {true, now};
}

// -- node_liveness_registry ---------------------------------------------------

node_liveness_registry& node_liveness_registry::instance() {
  static node_liveness_registry registry;
  return registry;
}

node_liveness_ptr node_liveness_registry::join(uint64_t local, uint64_t peer,
                                               const std::string& host) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& slot = groups_[key{local, peer, host}];
  auto group = slot.lock();
  if (!group) {
    group = std::make_shared<node_liveness>();
    slot = group;
  }
  if (groups_.size() >= sweep_at_) {
    for (auto i = groups_.begin(); i != groups_.end();)
      i = i->second.expired() ? groups_.erase(i) : std::next(i);
    sweep_at_ = std::max<size_t>(64, 2 * groups_.size());
  }
  return group;
}

size_t node_liveness_registry::groups() const {
  std::lock_guard<std::mutex> guard{mtx_};
  size_t n = 0;
  for (auto& [k, group] : groups_)
    n += group.expired() ? 0 : 1;
  return n;
}

std::string node_liveness_registry::host_of(const std::string& peer) {
  auto colon = peer.rfind(':');
  return colon == std::string::npos ? peer : peer.substr(0, colon);
}

} // namespace rdmactor
