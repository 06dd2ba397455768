#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace rdmactor::transport::soft {

/// Result of a non-blocking socket read.
enum class io_status {
  ok,          ///< some bytes arrived
  would_block, ///< nothing to read now
  eof,         ///< the peer closed its sending side
  error,       ///< the socket failed (errno in the out parameter)
};

/// Reads up to `n` bytes from `fd` into `dst` without blocking; sets `got`
/// (and `err` on `error`).  Retries on EINTR.
io_status recv_some(int fd, void* dst, size_t n, size_t& got, int& err);

/// A fixed buffer a queue pair reads its socket through, so that one
/// `recv` picks up many small frames.  Loop thread only.
class rx_buffer {
public:
  explicit rx_buffer(size_t capacity);

  /// Returns the number of buffered, unconsumed bytes.
  size_t available() const noexcept {
    return end_ - begin_;
  }

  /// Returns the first unconsumed byte.
  const uint8_t* data() const noexcept {
    return buf_.get() + begin_;
  }

  /// Returns how many bytes the next `fill` asks the socket for.
  size_t room() const noexcept {
    return capacity_ - available();
  }

  /// Marks `n <= available()` bytes as consumed.
  void consume(size_t n) noexcept;

  /// Moves the unconsumed bytes to the front and reads what the socket has
  /// into the free tail.
  io_status fill(int fd, int& err);

private:
  std::unique_ptr<uint8_t[]> buf_;
  size_t capacity_;
  size_t begin_ = 0;
  size_t end_ = 0;
};

} // namespace rdmactor::transport::soft
