#include "transport/soft/rx_buffer.hpp"

#include <cerrno>
#include <cstring>

#include <sys/socket.h>

namespace rdmactor::transport::soft {

io_status recv_some(int fd, void* dst, size_t n, size_t& got, int& err) {
  got = 0;
  for (;;) {
    auto k = ::recv(fd, dst, n, MSG_DONTWAIT);
    if (k > 0) {
      got = static_cast<size_t>(k);
      return io_status::ok;
    }
    if (k == 0)
      return n == 0 ? io_status::ok : io_status::eof;
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return io_status::would_block;
    err = errno;
    return io_status::error;
  }
}

rx_buffer::rx_buffer(size_t capacity)
    : buf_(new uint8_t[capacity]), capacity_(capacity) {
  // nop
}

void rx_buffer::consume(size_t n) noexcept {
  begin_ += n;
  if (begin_ == end_)
    begin_ = end_ = 0;
}

io_status rx_buffer::fill(int fd, int& err) {
  if (begin_ > 0) {
    std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  size_t got = 0;
  auto st = recv_some(fd, buf_.get() + end_, capacity_ - end_, got, err);
  end_ += got;
  return st;
}

} // namespace rdmactor::transport::soft
