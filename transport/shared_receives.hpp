#pragma once

// Internal to the data path (transport/link*.cpp, transport/fabric.cpp):
// the receive buffers a device's queue pairs share through its shared
// receive queue.  CAF-free (but for caf::expected and caf::error, as in
// fabric.hpp).  Not installed.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "common/tuning.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor::transport {

namespace detail {

/// Where a received message's `mr_block` and its control block live:
/// preallocated per receive slot, so receiving allocates nothing.
struct alignas(64) block_storage {
  unsigned char bytes[tuning::slot_block_bytes];
};

/// Receive work requests carry this bit in their wr_id (the slot number in
/// the low bits); send, one-sided and atomic work requests do not.
constexpr uint64_t recv_wr_bit = uint64_t{1} << 63;

} // namespace detail

/// The receive buffers of a device's shared receive queue: slots of
/// `slot_bytes`, registered in chunks of `chunk_slots`, all posted to the
/// queue, and reposted by whoever drops the last handle of a message.
///
/// Sized by traffic, not by peers: it starts with one chunk and adds one
/// (registers and posts it, on its own thread) whenever fewer than half a
/// chunk are posted, up to `max_slots`: the fabric says so (the queue's low
/// watermark, where it has one: soft), or a link that counts what it
/// consumed does.  Beyond that a peer's SEND waits
/// for a receive as on any queue pair (receiver not ready, up to the RNR
/// timeout).  Credits still bound what each peer can take: a connection
/// grants its peer `recv_depth` receives and returns one only when a
/// message's buffer came back, so one peer never holds more than
/// `recv_depth` slots however fast it sends (docs/architecture.md,
/// "Shared receives").
///
/// Thread-safe: links on any thread consume and repost.  Chunks are never
/// released before the object goes (with the last link and the last
/// handle of a received message).
class shared_receives {
public:
  /// How the buffers are laid out and how far they grow.
  struct layout {
    uint32_t slot_bytes = 0;
    uint32_t chunk_slots = 0;
    uint32_t max_slots = 0;
  };

  /// Creates the shared receive queue of `dev`, registers and posts the
  /// first chunk, and makes `dev` attach the queue to every queue pair it
  /// makes from now on.  Fails where the device has no shared receive
  /// queue, or registering or posting fails.
  static caf::expected<std::shared_ptr<shared_receives>>
  open(const device_ptr& dev, layout l);

  ~shared_receives();

  shared_receives(const shared_receives&) = delete;
  shared_receives& operator=(const shared_receives&) = delete;

  const srq_ptr& srq() const noexcept {
    return srq_;
  }

  uint32_t slot_bytes() const noexcept {
    return layout_.slot_bytes;
  }

  /// Slots registered so far.  Any thread.
  uint32_t slots() const noexcept {
    return chunk_count_.load(std::memory_order_acquire) * layout_.chunk_slots;
  }

  /// Receives posted and not consumed yet (as the links counted them).
  uint32_t posted() const noexcept {
    auto n = posted_.load(std::memory_order_relaxed);
    return n > 0 ? static_cast<uint32_t>(n) : 0;
  }

  /// Bytes of receive buffers registered.
  uint64_t registered_bytes() const noexcept {
    return uint64_t{slots()} * layout_.slot_bytes;
  }

  /// The buffer of slot `i` (below `slots()`).
  uint8_t* slot(uint32_t i) const noexcept {
    return chunk_of(i).mem.get()
           + size_t{i % layout_.chunk_slots} * layout_.slot_bytes;
  }

  uint32_t lkey(uint32_t i) const noexcept {
    return chunk_of(i).reg->lkey();
  }

  uint32_t rkey(uint32_t i) const noexcept {
    return chunk_of(i).reg->rkey();
  }

  /// The storage of the message block of slot `i`.
  unsigned char* block(uint32_t i) const noexcept {
    return chunk_of(i).blocks[i % layout_.chunk_slots].bytes;
  }

  /// Posts slot `i` to the queue again.  Any thread.
  void repost(uint32_t i) noexcept;

  /// Posts slot `i`, which a receive consumed that no link counted
  /// (`on_consumed`): a failed one, or one left unpolled when its link
  /// went.  Any thread.
  void recycle(uint32_t i) noexcept {
    post_slot(i);
  }

  /// Counts a receive a link polled; asks for a chunk more when few are
  /// left.  Caller: a link's owner.
  void on_consumed() noexcept;

private:
  struct chunk {
    std::unique_ptr<uint8_t[]> mem;
    std::unique_ptr<memory_region> reg;
    std::unique_ptr<detail::block_storage[]> blocks;
  };

  shared_receives(device_ptr dev, srq_ptr srq, layout l);

  const chunk& chunk_of(uint32_t i) const noexcept {
    return *chunks_[i / layout_.chunk_slots];
  }

  /// Posts slot `i`; false (logged) when the queue refuses it.
  bool post_slot(uint32_t i) noexcept;

  /// Registers and posts one more chunk.  With grow_mtx_ held.
  caf::error grow_locked();

  /// Asks the grower thread for a chunk more.  Takes only signal_mtx_: the
  /// fabric may call it with its locks held.
  void want_more() noexcept;

  /// Arms the queue's low watermark (half a chunk) to call `want_more`.
  void arm_low_watermark();

  /// Body of the grower thread.
  void grow_when_asked();

  device_ptr dev_;
  srq_ptr srq_;
  const layout layout_;
  const uint32_t max_chunks_;
  /// Published chunks: entries below chunk_count_ are set and never change.
  std::unique_ptr<std::unique_ptr<chunk>[]> chunks_;
  std::atomic<uint32_t> chunk_count_{0};
  std::atomic<int64_t> posted_{0};
  std::mutex grow_mtx_;
  /// Growing failed once (registration refused): no more tries.
  std::atomic<bool> grow_failed_{false};
  std::mutex signal_mtx_;
  std::condition_variable signal_;
  bool due_ = false;  ///< guarded by signal_mtx_
  bool stop_ = false; ///< guarded by signal_mtx_
  std::thread grower_;
};

} // namespace rdmactor::transport
