#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/expected.hpp>

#include "rdmactor/mr_token.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor {

/// One block of registered local memory with a release action.
///
/// Created by the allocator (arena slices, dedicated registrations) and by
/// the transport actor (receive buffers).  The release action runs when the
/// last `local_mr` referring to the block goes, on whatever thread drops it:
/// it returns the memory to its arena or reposts the receive buffer.
class mr_block {
public:
  using release_fn = std::function<void()>;

  mr_block(uint8_t* data, size_t size, uint32_t lkey, uint32_t rkey,
           release_fn on_release)
      : data_(data), size_(size), lkey_(lkey), rkey_(rkey),
        on_release_(std::move(on_release)) {}

  mr_block(const mr_block&) = delete;
  mr_block& operator=(const mr_block&) = delete;

  ~mr_block() {
    if (on_release_)
      on_release_();
  }

  uint8_t* data() const noexcept {
    return data_;
  }
  size_t size() const noexcept {
    return size_;
  }
  uint32_t lkey() const noexcept {
    return lkey_;
  }
  uint32_t rkey() const noexcept {
    return rkey_;
  }

private:
  uint8_t* data_;
  size_t size_;
  uint32_t lkey_;
  uint32_t rkey_;
  release_fn on_release_;
};

/// A handle to a range of registered local memory (async-rdma's LocalMr).
///
/// Copies share the block; the memory returns to its owner when the last
/// handle goes.  Slices share the block too.  Thread-compatible: a handle
/// may be moved between actors; the bytes are not synchronized.
class local_mr {
public:
  local_mr() = default;

  explicit local_mr(std::shared_ptr<mr_block> block)
      : block_(std::move(block)), offset_(0),
        length_(block_ ? block_->size() : 0) {}

  /// Returns false for a default-constructed (empty) handle.
  bool valid() const noexcept {
    return block_ != nullptr;
  }

  uint8_t* data() const noexcept {
    return block_ ? block_->data() + offset_ : nullptr;
  }

  size_t size() const noexcept {
    return length_;
  }

  uint64_t addr() const noexcept {
    return reinterpret_cast<uint64_t>(data());
  }

  uint32_t lkey() const noexcept {
    return block_ ? block_->lkey() : 0;
  }

  uint32_t rkey() const noexcept {
    return block_ ? block_->rkey() : 0;
  }

  /// Returns the token a peer needs to access this range remotely.
  mr_token token() const noexcept {
    return mr_token{addr(), length_, rkey()};
  }

  /// Returns the scatter/gather element covering this range.
  transport::sge to_sge() const noexcept {
    return transport::sge{addr(), static_cast<uint32_t>(length_), lkey()};
  }

  /// Returns the sub-range [offset, offset + length) sharing this block, or
  /// `errc::out_of_bounds` when it does not fit.
  caf::expected<local_mr> slice(size_t offset, size_t length) const;

  /// Returns how many handles share the block (for tests and diagnostics).
  long use_count() const noexcept {
    return block_.use_count();
  }

private:
  std::shared_ptr<mr_block> block_;
  size_t offset_ = 0;
  size_t length_ = 0;
};

} // namespace rdmactor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rdmactor::local_mr)
