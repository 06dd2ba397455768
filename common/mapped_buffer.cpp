#include "common/mapped_buffer.hpp"

#include <cstring>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

namespace rdmactor {

namespace {

size_t page_rounded(size_t n) noexcept {
  static const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

} // namespace

mapped_buffer::mapped_buffer(mapped_buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

mapped_buffer& mapped_buffer::operator=(mapped_buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

mapped_buffer::~mapped_buffer() {
  release();
}

bool mapped_buffer::reserve(size_t n) noexcept {
  if (n <= capacity_)
    return true;
  auto want = page_rounded(n);
  void* p;
  if (data_ == nullptr)
    p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
             -1, 0);
  else
    p = mremap(data_, capacity_, want, MREMAP_MAYMOVE);
  if (p == MAP_FAILED)
    return false;
  data_ = static_cast<uint8_t*>(p);
  capacity_ = want;
  return true;
}

void mapped_buffer::append(const uint8_t* src, size_t n) noexcept {
  if (n == 0)
    return;
  std::memcpy(data_ + size_, src, n);
  size_ += n;
}

void mapped_buffer::release() noexcept {
  if (data_ != nullptr)
    munmap(data_, capacity_);
  data_ = nullptr;
  size_ = 0;
  capacity_ = 0;
}

} // namespace rdmactor
