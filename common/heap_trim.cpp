#include "common/heap_trim.hpp"

#include <atomic>

#if defined(__GLIBC__)
#  include <malloc.h>
#endif

namespace rdmactor {

namespace {

std::atomic<bool> trimming{false};

} // namespace

bool trim_heap() noexcept {
#if defined(__GLIBC__)
  if (trimming.exchange(true, std::memory_order_acquire))
    return false;
  malloc_trim(0);
  trimming.store(false, std::memory_order_release);
  return true;
#else
  return false;
#endif
}

} // namespace rdmactor
