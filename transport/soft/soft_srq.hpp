#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "common/ring_deque.hpp"
#include "rdmactor/transport/fabric.hpp"
#include "transport/soft/work_requests.hpp"

namespace rdmactor::transport::soft {

class soft_device;
class soft_queue_pair;

/// A queue pair's mark in a shared receive queue that it waits for a
/// receive.  The queue pair owns it and clears `qp` (under `mtx`) before it
/// goes, so the queue never calls a queue pair that is gone.
struct srq_waiter {
  std::mutex mtx;
  soft_queue_pair* qp = nullptr;
  /// In the queue's list of waiters; guarded by the queue's mutex.
  bool queued = false;
};

/// The soft fabric's shared receive queue: receives, posted by anyone,
/// that the queue pairs created with it take one at a time, the oldest
/// first, when a SEND or a WRITE with immediate data arrives.  A queue pair
/// that finds it empty waits as it does without a posted receive (buffers,
/// stalls, fails at its RNR timer); each `post_recv` wakes the one that
/// waited longest (or, when that one waits no more, the next).  A queue pair
/// that fails gives back the receives it took and did not fill.
///
/// Locks: a queue pair calls `take` and `give_back` with its own mutex
/// held (queue pair, then this queue); `post_recv` wakes the waiters after
/// it released this queue's mutex (waiter, then queue pair).
class soft_srq final : public shared_receive_queue {
public:
  soft_srq(std::shared_ptr<soft_device> dev, uint32_t max_wr);

  caf::error post_recv(uint64_t wr_id, const sge* sg, size_t n) override;

  uint32_t max_wr() const noexcept override {
    return max_wr_;
  }

  bool set_low_watermark(uint32_t limit, std::function<void()> fn) override;

  /// Moves the oldest receive into `out`.  When there is none, `w` is
  /// woken at the next post (once) and false returned.  Caller: a queue
  /// pair with its mutex held.
  bool take(posted_recv& out, const std::shared_ptr<srq_waiter>& w);

  /// Puts receives a failing queue pair took and did not fill back at the
  /// front, in their order.  Caller: a queue pair with its mutex held.
  void give_back(ring_deque<posted_recv>& taken);

  /// Receives posted and not taken.  Any thread.
  size_t posted() const;

  /// When the last receive was posted (the queue's creation before any).
  /// A queue pair waiting for a receive fails at its RNR timer only when
  /// this is older than the timeout.  Any thread.
  std::chrono::steady_clock::time_point last_post() const noexcept {
    return std::chrono::steady_clock::time_point{
        std::chrono::steady_clock::duration{last_post_.load()}};
  }

private:
  std::shared_ptr<soft_device> dev_;
  const uint32_t max_wr_;
  std::atomic<std::chrono::steady_clock::rep> last_post_;
  mutable std::mutex mtx_;
  ring_deque<posted_recv> rq_;
  /// The armed low watermark (0: none) and what it calls.
  uint32_t limit_ = 0;
  std::function<void()> low_;
  /// Queue pairs waiting for a receive, the oldest first.
  ring_deque<std::shared_ptr<srq_waiter>> waiters_;
};

} // namespace rdmactor::transport::soft
