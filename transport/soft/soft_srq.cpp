#include "transport/soft/soft_srq.hpp"

#include <string>
#include <utility>

#include "rdmactor/error.hpp"
#include "transport/soft/soft_device.hpp"
#include "transport/soft/soft_queue_pair.hpp"

namespace rdmactor::transport::soft {

soft_srq::soft_srq(std::shared_ptr<soft_device> dev, uint32_t max_wr)
    : dev_(std::move(dev)), max_wr_(max_wr),
      last_post_(std::chrono::steady_clock::now().time_since_epoch().count()) {}

caf::error soft_srq::post_recv(uint64_t wr_id, const sge* sg, size_t n) {
  if (auto err = check_sg(sg, n))
    return err;
  auto r = make_posted_recv(dev_->pd(), wr_id, sg, n);
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (rq_.size() >= max_wr_)
      return make_error(errc::quota_exceeded,
                        "shared receive queue full: " + std::to_string(max_wr_)
                            + " receives posted");
    rq_.push_back(std::move(r));
  }
  last_post_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                   std::memory_order_relaxed);
  // One receive, one waiter (the oldest) woken: with thousands waiting, a
  // post that woke them all would cost thousands of wake-ups.  A waiter
  // that no longer waits passes the receive on to the next.  Outside the
  // queue's mutex: a queue pair takes its own mutex.
  for (;;) {
    std::shared_ptr<srq_waiter> w;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (waiters_.empty() || rq_.empty())
        return {};
      w = std::move(waiters_.front());
      waiters_.pop_front();
      w->queued = false;
    }
    std::lock_guard<std::mutex> guard{w->mtx};
    if (w->qp != nullptr && w->qp->on_shared_receive())
      return {};
  }
}

bool soft_srq::set_low_watermark(uint32_t limit, std::function<void()> fn) {
  std::function<void()> now;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    limit_ = limit;
    low_ = std::move(fn);
    if (limit_ > 0 && rq_.size() < limit_) {
      limit_ = 0;
      now = low_;
    }
  }
  if (now)
    now();
  return true;
}

bool soft_srq::take(posted_recv& out, const std::shared_ptr<srq_waiter>& w) {
  std::lock_guard<std::mutex> guard{mtx_};
  bool got = !rq_.empty();
  if (got) {
    out = std::move(rq_.front());
    rq_.pop_front();
  } else if (!w->queued) {
    w->queued = true;
    waiters_.push_back(w);
  }
  if (limit_ > 0 && rq_.size() < limit_) {
    limit_ = 0; // fired: armed again by its owner
    if (low_)
      low_(); // only signals (see fabric.hpp)
  }
  return got;
}

void soft_srq::give_back(ring_deque<posted_recv>& taken) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto i = taken.size(); i > 0; --i)
    rq_.push_front(std::move(taken[i - 1]));
  taken.clear();
}

size_t soft_srq::posted() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return rq_.size();
}

} // namespace rdmactor::transport::soft
