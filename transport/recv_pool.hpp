#pragma once

// Internal to the data path (transport/link*.cpp): the registered receive
// buffers of one connection and the lock-free ring through which any
// thread hands a buffer back.  CAF-free (but for caf::expected and
// caf::error, as in fabric.hpp).  Not installed.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <thread>

#include "common/tuning.hpp"
#include "rdmactor/transport/fabric.hpp"
#include "transport/shared_receives.hpp"

namespace rdmactor::transport::detail {

using tuning::slot_block_bytes;

/// A bounded multi-producer, single-consumer queue of slot numbers
/// (Vyukov's array queue).  Producers: any thread dropping the last handle
/// of a received message; consumer: the link's owner.  It never holds
/// more than `capacity` items because a slot is released at most once per
/// posting and reposted only after the consumer took it.
class slot_ring {
public:
  explicit slot_ring(uint32_t min_capacity) {
    size_t cap = 1;
    while (cap < min_capacity)
      cap <<= 1;
    cells_.reset(new cell[cap]);
    for (size_t i = 0; i < cap; ++i)
      cells_[i].seq.store(i, std::memory_order_relaxed);
    mask_ = cap - 1;
  }

  /// Appends `value`.  Any thread.
  void push(uint32_t value) noexcept {
    auto pos = tail_.fetch_add(1, std::memory_order_relaxed);
    auto& c = cells_[pos & mask_];
    // The cell is free by construction (see above); wait out a consumer
    // that is just handing it back.
    while (c.seq.load(std::memory_order_acquire) != pos)
      std::this_thread::yield();
    c.value = value;
    c.seq.store(pos + 1, std::memory_order_release);
  }

  /// Takes the oldest item; false when empty.  The consumer only.
  bool pop(uint32_t& value) noexcept {
    auto& c = cells_[head_ & mask_];
    if (c.seq.load(std::memory_order_acquire) != head_ + 1)
      return false;
    value = c.value;
    c.seq.store(head_ + mask_ + 1, std::memory_order_release);
    ++head_;
    return true;
  }

private:
  struct cell {
    std::atomic<uint64_t> seq{0};
    uint32_t value = 0;
  };
  std::unique_ptr<cell[]> cells_;
  uint64_t mask_ = 0;
  alignas(64) std::atomic<uint64_t> tail_{0};
  alignas(64) uint64_t head_ = 0;
};

/// The receive buffers of one connection: its own registration, or slots
/// of its device's `shared_receives` (`shared` set).  Shared by every
/// `local_mr` that views a received message, so the memory outlives the
/// link and its owner when users keep such handles.
///
/// A received message is a `local_mr` whose block (and shared-pointer
/// control block) lives in storage preallocated for its slot: receiving
/// allocates nothing.  When the last handle goes, the slot goes into
/// `released`; the link drains it and reposts whenever its owner runs.
/// The owner is woken only when it asked for a wake-up (`wake_armed`) and
/// `wake_at` releases wait in the ring: enough for the credits they free to
/// be due (see `link::reclaim`), not once per buffer.  With shared
/// receives a release reposts the slot to the shared queue at once, on the
/// releasing thread (so no slot is lost when the link is gone), and only
/// counts the credit it frees for the link (`unclaimed`; the ring stays
/// empty).
struct recv_pool {
  using block_storage = detail::block_storage;

  /// Set when the slots are the device's shared ones.
  std::shared_ptr<shared_receives> shared;
  std::unique_ptr<uint8_t[]> mem;
  std::unique_ptr<memory_region> reg;
  uint32_t slot_bytes = 0;
  uint32_t depth = 0;
  std::unique_ptr<block_storage[]> blocks;
  /// Slots released for reposting (own slots only: shared ones are reposted
  /// by whoever releases them).
  std::unique_ptr<slot_ring> released;
  std::atomic<bool> wake_armed{true};
  /// Releases in `released` the owner has not drained yet.
  std::atomic<uint32_t> unclaimed{0};
  /// The owner is woken once `unclaimed` reaches this; set by the owner.
  std::atomic<uint32_t> wake_at{1};
  /// Wakes the owner (`wake_target::repost`: `repost_atom` to it); set
  /// before its first completion is polled (no slot is released before).
  /// Called on the releasing thread.
  std::function<void()> wake;

  /// Slot numbers a receive completion may carry.
  uint32_t slots() const noexcept {
    return shared ? shared->slots() : depth;
  }

  uint8_t* slot(uint32_t i) const noexcept {
    return shared ? shared->slot(i) : mem.get() + size_t{i} * slot_bytes;
  }

  uint32_t lkey(uint32_t i) const noexcept {
    return shared ? shared->lkey(i) : reg->lkey();
  }

  uint32_t rkey(uint32_t i) const noexcept {
    return shared ? shared->rkey(i) : reg->rkey();
  }

  /// The storage of the message block of slot `i`.
  unsigned char* block(uint32_t i) const noexcept {
    return shared ? shared->block(i) : blocks[i].bytes;
  }

  /// The scatter element that receives into slot `i`.
  sge slot_sge(uint32_t i) const {
    return sge{reinterpret_cast<uint64_t>(slot(i)), slot_bytes, lkey(i)};
  }

  /// Hands slot `i` back for reposting.  Any thread.
  void release(uint32_t i) noexcept {
    if (shared)
      shared->repost(i);
    // Counted before it is pushed, so the owner, which subtracts what it
    // popped, never sees fewer than the ring holds.  Sequentially
    // consistent, as the owner's side in `link::reclaim`: either this
    // thread sees the owner's new threshold and armed flag, or the owner
    // sees this release when it looks once more.
    auto n = unclaimed.fetch_add(1) + 1;
    if (!shared)
      released->push(i);
    if (n >= wake_at.load() && wake_armed.exchange(false) && wake)
      wake();
  }
};

/// Allocates the block of a received message in its slot's storage and
/// releases the slot when that storage is given back: after the last
/// handle went and the block was destroyed, so a reposted slot never meets
/// a block still being torn down.  Holds the pool alive until then.
template <class T>
struct slot_allocator {
  using value_type = T;

  std::shared_ptr<recv_pool> pool;
  uint32_t slot = 0;

  slot_allocator(std::shared_ptr<recv_pool> p, uint32_t i) noexcept
      : pool(std::move(p)), slot(i) {}

  template <class U>
  slot_allocator(const slot_allocator<U>& other) noexcept
      : pool(other.pool), slot(other.slot) {}

  T* allocate(size_t n) {
    if (n * sizeof(T) <= slot_block_bytes
        && alignof(T) <= alignof(recv_pool::block_storage))
      return reinterpret_cast<T*>(pool->block(slot));
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }

  void deallocate(T* p, size_t) noexcept {
    if (reinterpret_cast<unsigned char*>(p) != pool->block(slot))
      ::operator delete(p);
    pool->release(slot);
  }

  template <class U>
  bool operator==(const slot_allocator<U>& other) const noexcept {
    return pool == other.pool && slot == other.slot;
  }

  template <class U>
  bool operator!=(const slot_allocator<U>& other) const noexcept {
    return !(*this == other);
  }
};

/// Creates the receive pool of `qp`: with a shared receive queue, a view of
/// its slots (`shared_receives`); otherwise recv_depth slots of
/// max_message_len bytes in one registration, every receive posted.
/// Fails when the connection's receive depth is below min_recv_depth, when
/// the shared slots are smaller than the negotiated max message length or
/// gone, when registering fails or when a receive cannot be posted.
caf::expected<std::shared_ptr<recv_pool>> make_recv_pool(device& dev,
                                                         queue_pair& qp);

} // namespace rdmactor::transport::detail
