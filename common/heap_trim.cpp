#include "common/heap_trim.hpp"

#include <atomic>
#include <cstdint>

#if defined(__GLIBC__)
#  include <malloc.h>
#endif

namespace rdmactor {

namespace {

/// Trims asked for and not done yet; the thread that raised it from 0
/// trims until it has caught up.
std::atomic<uint32_t> asked{0};

} // namespace

bool trim_heap() noexcept {
#if defined(__GLIBC__)
  if (asked.fetch_add(1, std::memory_order_acq_rel) != 0)
    return false; // the trimming thread trims once more for us
  auto seen = asked.load(std::memory_order_acquire);
  for (;;) {
    malloc_trim(0);
    // Asked again meanwhile: trim again; else done (back to 0).
    if (asked.compare_exchange_strong(seen, 0, std::memory_order_acq_rel))
      return true;
  }
#else
  return false;
#endif
}

} // namespace rdmactor
