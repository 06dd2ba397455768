#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>

#include "common/ring_deque.hpp"

namespace rdmactor {

/// Items from the peer handed on in arrival order while some of them wait
/// for an RDMA READ of their bytes (rendezvous SendData chunks, rendezvous
/// actor messages).  An item is *done* once its bytes are in place (it
/// arrived eagerly, or its READ finished) or it failed; `drain` hands on
/// the done items at the front, so a later item never overtakes an earlier
/// one still being read.  Each item counts `counted` bytes against the
/// peer's budget until it is handed on.  CAF-free and clock-free: the
/// caller passes deadlines and the time.
template <class T>
class in_order_reader {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// Nothing is held (a new item may then be handed on at once).
  bool empty() const noexcept {
    return items_.empty();
  }

  /// Bytes the held items count.
  uint64_t bytes() const noexcept {
    return bytes_;
  }

  /// Adds an item whose bytes are in place.
  void push_ready(T item, uint64_t counted) {
    push(std::move(item), counted, state::ready, time_point::max());
  }

  /// Adds an item refused in its turn (its `fn` in `drain` sees `failed`).
  void push_failed(T item) {
    push(std::move(item), 0, state::failed, time_point::max());
  }

  /// Adds an item whose bytes a READ brings by `deadline`; returns the
  /// number `complete` names it by.
  uint64_t push_reading(T item, uint64_t counted, time_point deadline) {
    return push(std::move(item), counted, state::reading, deadline);
  }

  /// The READ of item `seq` ended (`ok`: its bytes are in place).  Returns
  /// the item, or null when no READ of that number is in flight (dropped
  /// by `clear`, or completed before).
  T* complete(uint64_t seq, bool ok) {
    auto i = std::find_if(items_.begin(), items_.end(),
                          [seq](const entry& e) { return e.seq == seq; });
    if (i == items_.end() || i->st != state::reading)
      return nullptr;
    i->st = ok ? state::ready : state::failed;
    return &i->item;
  }

  /// Hands the done items at the front to `fn(T&&, bool failed)`, in
  /// order, while `proceed()` holds.
  template <class F, class P>
  void drain(F fn, P proceed) {
    while (!items_.empty() && items_.front().st != state::reading
           && proceed()) {
      auto e = std::move(items_.front());
      items_.pop_front();
      bytes_ -= e.counted;
      fn(std::move(e.item), e.st == state::failed);
    }
  }

  template <class F>
  void drain(F fn) {
    drain(std::move(fn), [] { return true; });
  }

  /// The earliest deadline of a READ in flight (`time_point::max()` when
  /// none), and whether one passed by `now`.
  std::pair<time_point, bool> deadlines(time_point now) const {
    auto next = time_point::max();
    for (const auto& e : items_)
      if (e.st == state::reading)
        next = std::min(next, e.deadline);
    return {next, next <= now};
  }

  /// Forgets every item (the connection ends: a READ in flight keeps its
  /// memory alive in the transport until it completes or the queue pair
  /// is gone).
  void clear() {
    items_.clear();
    bytes_ = 0;
  }

private:
  enum class state { reading, ready, failed };

  struct entry {
    uint64_t seq;
    T item;
    uint64_t counted;
    state st;
    time_point deadline;
  };

  uint64_t push(T item, uint64_t counted, state st, time_point deadline) {
    auto seq = next_seq_++;
    items_.push_back(entry{seq, std::move(item), counted, st, deadline});
    bytes_ += counted;
    return seq;
  }

  ring_deque<entry> items_;
  uint64_t next_seq_ = 0;
  uint64_t bytes_ = 0;
};

} // namespace rdmactor
