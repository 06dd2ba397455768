#include "transport/soft/completion_queue.hpp"

#include "transport/soft/limits.hpp"

namespace rdmactor::transport::soft {

bool completion_queue::push(const work_completion& wc) {
  bool fire = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (entries_.size() >= limits::max_cq_entries)
      return false;
    entries_.push_back(wc);
    if (armed_) {
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

void completion_queue::arm() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (entries_.empty()) {
      armed_ = true;
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
