#pragma once

#include <cstddef>
#include <cstdint>

namespace rdmactor {

/// A growable byte buffer in pages of its own (`mmap`), given back to the
/// system when it goes.  For the large buffers a peer makes the node hold
/// for a while (the reassembly of a chunked actor message): from the heap,
/// glibc keeps such a block resident after it is freed when it ends up at
/// the top of a thread's arena, which `malloc_trim` does not shrink (two
/// peers that each left 48 MiB of an unfinished message kept 59 MiB
/// resident after they went; docs/security.md).  Single-threaded,
/// move-only.
class mapped_buffer {
public:
  mapped_buffer() noexcept = default;
  mapped_buffer(const mapped_buffer&) = delete;
  mapped_buffer& operator=(const mapped_buffer&) = delete;
  mapped_buffer(mapped_buffer&& other) noexcept;
  mapped_buffer& operator=(mapped_buffer&& other) noexcept;
  ~mapped_buffer();

  /// Makes room for `n` bytes in all (keeps the content); false when the
  /// system has no memory for it (the buffer is unchanged).
  bool reserve(size_t n) noexcept;

  /// Appends `n` bytes from `src`; the caller reserved room for them.
  void append(const uint8_t* src, size_t n) noexcept;

  /// Gives the pages back; empty afterwards.
  void release() noexcept;

  const uint8_t* data() const noexcept {
    return data_;
  }

  size_t size() const noexcept {
    return size_;
  }

  /// Bytes mapped (a multiple of the page size; 0 when empty).
  size_t capacity() const noexcept {
    return capacity_;
  }

private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

} // namespace rdmactor
