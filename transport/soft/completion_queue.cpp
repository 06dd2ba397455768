#include "transport/soft/completion_queue.hpp"

#include <algorithm>

#include "transport/soft/limits.hpp"

namespace rdmactor::transport::soft {

namespace {

/// Whether `wc` notifies a CQ armed for receives.
bool wakes_receives(const work_completion& wc) noexcept {
  return wc.status != wc_status::success || wc.opcode == wc_opcode::recv
         || wc.opcode == wc_opcode::recv_rdma_with_imm;
}

} // namespace

bool completion_queue::push(const work_completion& wc) {
  bool fire = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (entries_.size() >= limits::max_cq_entries)
      return false;
    entries_.push_back(wc);
    if (armed_ && (!receives_only_ || wakes_receives(wc))) {
      armed_ = false;
      fire = true;
    }
  }
  // Outside our lock: the owner may be polling right now.
  if (fire)
    notify();
  return true;
}

size_t completion_queue::poll(work_completion* out, size_t max) {
  std::lock_guard<std::mutex> guard{mtx_};
  size_t n = 0;
  while (n < max && !entries_.empty()) {
    out[n++] = entries_.front();
    entries_.pop_front();
  }
  return n;
}

void completion_queue::arm(cq_events which) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    bool receives_only
        = which == cq_events::receives && (!armed_ || receives_only_);
    bool due = receives_only ? std::any_of(entries_.begin(), entries_.end(),
                                           wakes_receives)
                             : !entries_.empty();
    if (!due) {
      armed_ = true;
      receives_only_ = receives_only;
      return;
    }
    armed_ = false;
  }
  notify();
}

void completion_queue::notify() {
  if (notify_) {
    notify_();
    return;
  }
  std::lock_guard<std::mutex> guard{mtx_};
  if (efd_)
    efd_->signal();
  else
    unsignalled_ = true;
}

int completion_queue::fd() const noexcept {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!efd_) {
    auto efd = event_fd::make();
    if (!efd)
      return -1;
    efd_.emplace(std::move(*efd));
    if (unsignalled_)
      efd_->signal();
    unsignalled_ = false;
  }
  return efd_->fd();
}

bool completion_queue::ack() noexcept {
  std::lock_guard<std::mutex> guard{mtx_};
  return efd_ ? efd_->drain() : false;
}

void completion_queue::set_notify(std::function<void()> fn) {
  std::lock_guard<std::mutex> guard{mtx_};
  notify_ = std::move(fn);
}

} // namespace rdmactor::transport::soft
