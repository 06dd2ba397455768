#pragma once

// Internal to the agent actor: what the peer sent for the user's receive
// calls (receive_data, receive_imm, receive_local_mr, ...) and the calls
// waiting for it.  No actor: the agent wraps its response promises in a
// waiter (agent_state.hpp, take_as).  Not installed.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

#include <caf/error.hpp>

#include "common/ring_deque.hpp"

namespace rdmactor::agent_detail {

/// A queue of items the peer sent plus the receive calls waiting for one:
/// an item goes to the oldest waiting call, or queues until a call comes.
/// Each waiter knows how to answer its call (several calls answer the same
/// items in different shapes, e.g. with or without a tag).  The bytes the
/// queued items hold, `Weigh{}(item)`, count against the peer's queue
/// budget.
template <class Item, class Weigh>
class user_mailbox {
public:
  using clock_type = std::chrono::steady_clock;

  /// A receive call waiting for an item.
  struct waiter {
    std::function<void(Item&&)> deliver;
    std::function<void(const caf::error&)> fail;
    /// When the call gives up (`expire`).
    clock_type::time_point deadline;
  };

  /// Hands `item` to the oldest waiting call, or queues it.
  void put(Item item) {
    if (!waiters_.empty()) {
      auto w = std::move(waiters_.front());
      waiters_.pop_front();
      w.deliver(std::move(item));
      return;
    }
    queued_bytes_ += Weigh{}(item);
    items_.emplace_back(std::move(item));
  }

  /// The oldest queued item, taken out; none when nothing is queued.
  std::optional<Item> take() {
    if (items_.empty())
      return std::nullopt;
    queued_bytes_ -= Weigh{}(items_.front());
    std::optional<Item> x{std::move(items_.front())};
    items_.pop_front();
    return x;
  }

  /// Every queued item, taken out in order (the waiters stay).
  ring_deque<Item> take_all() {
    queued_bytes_ = 0;
    return std::exchange(items_, {});
  }

  /// Queues a call that found nothing.  Calls wait in the order of their
  /// deadlines: each caller gives now plus the same timeout.
  void wait(waiter w) {
    waiters_.push_back(std::move(w));
  }

  /// Fails the waiting calls whose deadline passed with `why()`; returns
  /// whether any call still waits.
  template <class Why>
  bool expire(clock_type::time_point now, Why why) {
    while (!waiters_.empty() && waiters_.front().deadline <= now) {
      auto w = std::move(waiters_.front());
      waiters_.pop_front();
      w.fail(why());
    }
    return !waiters_.empty();
  }

  /// Fails every waiting call with `err` and drops what is queued.
  void fail_all(const caf::error& err) {
    auto waiters = std::exchange(waiters_, {});
    for (auto& w : waiters)
      w.fail(err);
    items_.clear();
    queued_bytes_ = 0;
  }

  /// The queued items, oldest first.
  const ring_deque<Item>& items() const noexcept {
    return items_;
  }

  size_t queued() const noexcept {
    return items_.size();
  }

  /// What the queued items weigh (see the class comment).
  uint64_t queued_bytes() const noexcept {
    return queued_bytes_;
  }

  size_t waiting() const noexcept {
    return waiters_.size();
  }

private:
  ring_deque<Item> items_;
  ring_deque<waiter> waiters_;
  uint64_t queued_bytes_ = 0;
};

} // namespace rdmactor::agent_detail
