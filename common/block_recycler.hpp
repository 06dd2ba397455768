#pragma once

// Blocks of one size kept for reuse, and the allocator that takes them:
// objects a connection makes per operation (a send_data call's stream,
// with its shared_ptr control block) come back to it instead of the heap.
// Single-threaded.  Not installed.

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace rdmactor {

/// Freed blocks of one size (the first size asked for), at most
/// `max_kept` of them, handed out again before the heap is asked.
/// Blocks of other sizes come from and go to the heap.  Single-threaded:
/// every `take` and `give` on one thread at a time.
class block_recycler {
public:
  explicit block_recycler(size_t max_kept) : max_kept_(max_kept) {
    free_.reserve(max_kept);
  }

  block_recycler(const block_recycler&) = delete;
  block_recycler& operator=(const block_recycler&) = delete;

  ~block_recycler() {
    for (auto* p : free_)
      ::operator delete(p);
  }

  /// A block of `bytes` (aligned as `operator new` aligns).
  void* take(size_t bytes) {
    if (size_ == 0)
      size_ = bytes;
    if (bytes == size_ && !free_.empty()) {
      auto* p = free_.back();
      free_.pop_back();
      return p;
    }
    return ::operator new(bytes);
  }

  /// Gives back a block `take(bytes)` returned.
  void give(void* p, size_t bytes) noexcept {
    if (bytes == size_ && free_.size() < max_kept_)
      free_.push_back(p); // no allocation: reserved up to max_kept
    else
      ::operator delete(p);
  }

  /// Blocks waiting for reuse.
  size_t kept() const noexcept {
    return free_.size();
  }

private:
  size_t max_kept_;
  size_t size_ = 0;
  std::vector<void*> free_;
};

/// An allocator whose blocks come from a `block_recycler` it shares: for
/// `std::allocate_shared`, which puts the object and its control block in
/// one block.  The recycler lives as long as the last block it handed out.
template <class T>
struct recycling_allocator {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                "block_recycler's blocks have operator new's alignment");

  using value_type = T;

  std::shared_ptr<block_recycler> recycler;

  explicit recycling_allocator(std::shared_ptr<block_recycler> r) noexcept
      : recycler(std::move(r)) {}

  template <class U>
  recycling_allocator(const recycling_allocator<U>& other) noexcept
      : recycler(other.recycler) {}

  T* allocate(size_t n) {
    return static_cast<T*>(recycler->take(n * sizeof(T)));
  }

  void deallocate(T* p, size_t n) noexcept {
    recycler->give(p, n * sizeof(T));
  }

  template <class U>
  bool operator==(const recycling_allocator<U>& other) const noexcept {
    return recycler == other.recycler;
  }

  template <class U>
  bool operator!=(const recycling_allocator<U>& other) const noexcept {
    return recycler != other.recycler;
  }
};

} // namespace rdmactor
