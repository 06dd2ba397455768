// The receiving half of the data path: the connection's receive pool, the
// receives it posts and reposts, and what a receive completion carries (a
// message, an immediate value or credits).  The rest of link is in
// link.cpp.

#include <algorithm>
#include <thread>
#include <utility>

#include "common/tuning.hpp"
#include "rdmactor/error.hpp"
#include "transport/link.hpp"
#include "transport/recv_pool.hpp"

namespace rdmactor::transport {

namespace detail {

caf::expected<std::shared_ptr<recv_pool>> make_recv_pool(device& dev,
                                                         queue_pair& qp) {
  const auto& cp = qp.params();
  if (cp.recv_depth < min_recv_depth)
    return make_error(
        errc::invalid_argument,
        "the connection to " + qp.peer_name() + " has a receive depth of "
            + std::to_string(cp.recv_depth) + "; rdmactor needs at least "
            + std::to_string(min_recv_depth)
            + " (set recv-depth >= 4 on both sides)");
  auto pool = std::make_shared<recv_pool>();
  pool->depth = cp.recv_depth;
  if (auto srq = qp.srq()) {
    // The device's shared slots, posted already (transport/
    // shared_receives.hpp): nothing to register or post here.
    pool->shared = srq->buffers();
    if (!pool->shared)
      return make_error(errc::internal_error,
                        "the shared receive buffers of the connection to "
                            + qp.peer_name() + " are gone");
    pool->slot_bytes = pool->shared->slot_bytes();
    if (pool->slot_bytes < cp.max_message_len_bytes)
      return make_error(
          errc::invalid_argument,
          "the shared receive buffers (" + std::to_string(pool->slot_bytes)
              + " bytes) are smaller than the max message length negotiated "
                "with "
              + qp.peer_name() + " (" + std::to_string(cp.max_message_len_bytes)
              + " bytes)");
    return pool;
  }
  // recv_depth slots of max_message_len bytes, one registration, reposted
  // as consumers release them.
  pool->slot_bytes = cp.max_message_len_bytes;
  pool->mem.reset(new uint8_t[size_t{pool->slot_bytes} * pool->depth]);
  pool->blocks.reset(new recv_pool::block_storage[pool->depth]);
  pool->released = std::make_unique<slot_ring>(pool->depth);
  auto reg = dev.register_memory(pool->mem.get(),
                                 size_t{pool->slot_bytes} * pool->depth,
                                 access::local_write);
  if (!reg)
    return std::move(reg.error());
  pool->reg = std::move(*reg);
  for (uint32_t i = 0; i < pool->depth; ++i) {
    auto sg = pool->slot_sge(i);
    if (auto err = qp.post_recv(recv_wr_bit | i, &sg, 1))
      return err;
  }
  return pool;
}

} // namespace detail

using detail::recv_wr_bit;
using detail::slot_allocator;

// -- receiving ----------------------------------------------------------------

void link::post_recv_slot(uint32_t slot) {
  if (pool_->shared) {
    pool_->shared->repost(slot); // also when down: the others need it
    return;
  }
  if (down_)
    return;
  auto sg = pool_->slot_sge(slot);
  if (auto err = qp_->post_recv(recv_wr_bit | slot, &sg, 1))
    fail(std::move(err));
}

uint32_t link::repost_released() {
  auto& pool = *pool_;
  if (pool.shared) {
    // Reposted already by the threads that released them: only their
    // credits are ours.
    auto n = pool.unclaimed.load();
    for (uint32_t i = 0; i < n; ++i)
      credits_.on_reposted(true);
    handed_out_ -= n;
    pool.unclaimed.fetch_sub(n);
    return n;
  }
  uint32_t n = 0;
  uint32_t popped = 0;
  uint32_t slot = 0;
  while (pool.released->pop(slot)) {
    ++popped;
    if (slot >= pool.depth)
      continue; // cannot happen: slots come from our own blocks
    ++n;
    credits_.on_reposted(true);
    post_recv_slot(slot);
  }
  if (popped > 0) {
    handed_out_ -= popped;
    pool.unclaimed.fetch_sub(popped);
  }
  return n;
}

uint32_t link::receive_buffers_held() const noexcept {
  // Handed out and not drained, less those released but not drained yet
  // (a release is counted before it is pushed: never more than handed out).
  auto released = pool_->unclaimed.load();
  return handed_out_ > released ? handed_out_ - released : 0;
}

uint32_t link::reclaim() {
  auto& pool = *pool_;
  auto threshold = tuning::credit_return_threshold(pool.depth);
  uint32_t n = 0;
  for (;;) {
    auto k = repost_released();
    n += k;
    // Also after nothing was reposted here: the caller may have reposted
    // (submit) or received credits to report with (poll).
    maybe_return_credits();
    // Ask for a wake-up once the releases in the ring make a credit return
    // due, not for each one: until then nothing needs the transport (a
    // send drains the ring itself, so its credits are never stale).  Every
    // entry point that changes what is owed ends here (submit, poll), so
    // the threshold is never stale either.
    auto owed = credits_.owed();
    pool.wake_at.store(owed < threshold ? threshold - owed : 1);
    pool.wake_armed.store(true);
    // Look once more: a release that came before the threshold and the
    // flag were set may have found no wake-up to take.  If one took it,
    // its message is on the way.
    if (pool.unclaimed.load() < pool.wake_at.load()
        || !pool.wake_armed.exchange(false))
      break;
    // A release counted but not pushed yet (see recv_pool::release) left
    // nothing to pop: let its thread finish the push.
    if (k == 0)
      std::this_thread::yield();
  }
  return n;
}

void link::on_recv(const work_completion& wc) {
  auto slot = static_cast<uint32_t>(wc.wr_id & ~recv_wr_bit);
  if (slot >= pool_->slots()) {
    fail(make_error(errc::internal_error, "receive wr_id out of range"));
    return;
  }
  if (pool_->shared)
    pool_->shared->on_consumed();
  // Every receive the peer uses counts against what it was granted.  A
  // peer beyond it ignores credits: its requests would make us queue
  // replies that can never go, so the connection ends here.  This also
  // bounds what a peer that grants nothing can make us queue to the
  // replies to about the receives it was granted (link_test, "credits").
  if (!credits_.on_consumed()) {
    fail(make_error(errc::quota_exceeded,
                    "the peer " + params_.peer + " sent "
                        + std::to_string(credits_.overrun())
                        + " message(s) beyond the "
                        + std::to_string(credits_.granted())
                        + " receives it was granted (it ignores credits); "
                          "the connection ends"));
    return;
  }
  if (wc.opcode == wc_opcode::recv_rdma_with_imm) {
    // The peer's RDMA WRITE with immediate data: the value is the
    // application's (no credits), the receive goes back at once and is
    // owed like one a data message consumed.  Nothing is held for it, so
    // the peer keeps its credits whatever the consumer does.
    credits_.on_reposted(true);
    post_recv_slot(slot);
    if (observer_ != nullptr && !down_)
      observer_->on_imm(wc.imm_data, wc.byte_len);
    try_post();
    maybe_return_credits();
    return;
  }
  if (wc.has_imm && credits_.on_received(wc.imm_data)) {
    // Credit-only: nothing to deliver; the receive goes back at once.
    credits_.on_reposted(false);
    post_recv_slot(slot);
    try_post();
    // Credits that arrived may be what kept us from reporting ours.
    maybe_return_credits();
    return;
  }
  // View the receive buffer; its slot is released for reposting when the
  // last handle goes.  Block and control block live in the slot's storage.
  auto len = std::min<uint32_t>(wc.byte_len, pool_->slot_bytes);
  ++handed_out_;
  auto block = std::allocate_shared<mr_block>(
      slot_allocator<mr_block>{pool_, slot}, pool_->slot(slot), len,
      pool_->lkey(slot), pool_->rkey(slot), mr_block::release_fn{});
  if (observer_ != nullptr)
    observer_->on_message(local_mr{std::move(block)});
  // else: nobody listens; the buffer is reposted with the handle.
  try_post();
  maybe_return_credits();
}

} // namespace rdmactor::transport
