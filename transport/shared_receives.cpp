#include "transport/shared_receives.hpp"

#include <string>
#include <system_error>
#include <utility>

#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "common/thread_name.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor::transport {

caf::expected<std::shared_ptr<shared_receives>>
shared_receives::open(const device_ptr& dev, layout l) {
  if (l.slot_bytes == 0 || l.chunk_slots == 0 || l.max_slots < l.chunk_slots)
    return make_error(errc::invalid_argument,
                      "shared receives need slots of at least 1 byte, at "
                      "least 1 slot per chunk and srq-max-receives >= "
                      "srq-chunk-receives");
  // The queue holds every slot the buffers may ever have.
  l.max_slots -= l.max_slots % l.chunk_slots;
  auto srq = dev->create_srq(l.max_slots);
  if (!srq)
    return std::move(srq.error());
  std::shared_ptr<shared_receives> self{
      new shared_receives(dev, std::move(*srq), l)};
  {
    std::lock_guard<std::mutex> guard{self->grow_mtx_};
    if (auto err = self->grow_locked())
      return err;
  }
  try {
    self->grower_ = std::thread{[raw = self.get()] { raw->grow_when_asked(); }};
  } catch (const std::system_error& e) {
    return make_error(errc::fabric_unavailable,
                      std::string{"cannot start the thread that grows the "
                                  "shared receives: "}
                          + e.what());
  }
  self->arm_low_watermark();
  self->srq_->set_buffers(self, l.slot_bytes);
  dev->share_receives(self->srq_);
  return self;
}

shared_receives::shared_receives(device_ptr dev, srq_ptr srq, layout l)
    : dev_(std::move(dev)), srq_(std::move(srq)), layout_(l),
      max_chunks_(l.max_slots / l.chunk_slots),
      chunks_(new std::unique_ptr<chunk>[max_chunks_]) {}

shared_receives::~shared_receives() {
  // The grower ends first (it re-arms the watermark), then the fabric
  // calls us no more (the queue may outlive us in its queue pairs).
  {
    std::lock_guard<std::mutex> guard{signal_mtx_};
    stop_ = true;
  }
  signal_.notify_one();
  if (grower_.joinable())
    grower_.join();
  srq_->set_low_watermark(0, {});
}

void shared_receives::want_more() noexcept {
  {
    std::lock_guard<std::mutex> guard{signal_mtx_};
    due_ = true;
  }
  signal_.notify_one();
}

void shared_receives::arm_low_watermark() {
  srq_->set_low_watermark(layout_.chunk_slots / 2, [this] { want_more(); });
}

void shared_receives::grow_when_asked() {
  name_this_thread("rdm.srq.grow");
  for (;;) {
    {
      std::unique_lock<std::mutex> guard{signal_mtx_};
      signal_.wait(guard, [this] { return due_ || stop_; });
      if (stop_)
        return;
      due_ = false;
    }
    {
      std::lock_guard<std::mutex> guard{grow_mtx_};
      if (chunk_count_.load() < max_chunks_ && !grow_failed_.load()) {
        if (auto err = grow_locked()) {
          grow_failed_.store(true);
          warn_within("data path", "shared receive queue: adding "
                                       + std::to_string(layout_.chunk_slots)
                                       + " receives failed (" + to_string(err)
                                       + "); it stays at "
                                       + std::to_string(slots())
                                       + " (raise the memlock limit, or lower "
                                         "srq-max-receives)");
        }
      }
    }
    // Fires at once while still low: the next round grows again.
    if (chunk_count_.load() < max_chunks_ && !grow_failed_.load())
      arm_low_watermark();
  }
}

bool shared_receives::post_slot(uint32_t i) noexcept {
  auto sg
      = sge{reinterpret_cast<uint64_t>(slot(i)), layout_.slot_bytes, lkey(i)};
  if (auto err = srq_->post_recv(detail::recv_wr_bit | i, &sg, 1)) {
    // Cannot happen (the queue holds every slot); the slot stays out.
    warn_within("data path", "shared receive queue: reposting slot "
                                 + std::to_string(i)
                                 + " failed: " + to_string(err));
    return false;
  }
  return true;
}

void shared_receives::repost(uint32_t i) noexcept {
  if (post_slot(i))
    posted_.fetch_add(1, std::memory_order_relaxed);
}

void shared_receives::on_consumed() noexcept {
  auto left = posted_.fetch_sub(1, std::memory_order_relaxed) - 1;
  if (left < int64_t{layout_.chunk_slots / 2}
      && chunk_count_.load(std::memory_order_relaxed) < max_chunks_
      && !grow_failed_.load(std::memory_order_relaxed))
    want_more();
}

caf::error shared_receives::grow_locked() {
  auto index = chunk_count_.load(std::memory_order_relaxed);
  auto c = std::make_unique<chunk>();
  auto bytes = size_t{layout_.slot_bytes} * layout_.chunk_slots;
  c->mem.reset(new uint8_t[bytes]);
  c->blocks.reset(new detail::block_storage[layout_.chunk_slots]);
  auto reg = dev_->register_memory(c->mem.get(), bytes, access::local_write);
  if (!reg)
    return std::move(reg.error());
  c->reg = std::move(*reg);
  chunks_[index] = std::move(c);
  chunk_count_.store(index + 1, std::memory_order_release);
  auto first = index * layout_.chunk_slots;
  for (uint32_t i = first; i < first + layout_.chunk_slots; ++i)
    repost(i);
  return {};
}

} // namespace rdmactor::transport
