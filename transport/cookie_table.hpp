#pragma once

// Who waits for which operation of a link: the link reports an operation
// by the cookie it was submitted with.  Not installed.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace rdmactor::transport {

/// The waiters (`T`: a response promise, a callback) of operations in
/// flight, by the cookie the link reports them with: slot + 1, since 0 is
/// "nobody waits".  Slots are reused.  Owned by the actor that drives the
/// link; single-threaded.
template <class T>
class cookie_table {
public:
  /// Stores `waiter` and returns its cookie (never 0).
  uint64_t add(T waiter) {
    if (free_.empty()) {
      slots_.push_back(slot{std::move(waiter), true});
      return slots_.size();
    }
    auto i = free_.back();
    free_.pop_back();
    slots_[i] = slot{std::move(waiter), true};
    return i + 1;
  }

  /// Removes and returns the waiter of `cookie`; an empty `T` for a cookie
  /// that names no waiter (0, out of range, or already taken).
  T take(uint64_t cookie) {
    if (cookie == 0 || cookie > slots_.size() || !slots_[cookie - 1].used)
      return T{};
    auto i = static_cast<size_t>(cookie - 1);
    auto waiter = std::move(slots_[i].waiter);
    slots_[i] = slot{};
    free_.push_back(i);
    return waiter;
  }

private:
  struct slot {
    T waiter{};
    bool used = false;
  };
  std::vector<slot> slots_;
  std::vector<size_t> free_;
};

} // namespace rdmactor::transport
