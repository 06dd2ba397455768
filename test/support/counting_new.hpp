#pragma once

// Replaces the program's global `operator new` with one that counts every
// call (`rdmactor::test::heap_allocations`), for tests that prove a path
// allocates nothing.  Include it in exactly one translation unit of a test
// program: it defines the replacement functions.

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace rdmactor::test {

/// Calls of the global `operator new` (and, through it, `new[]`) so far.
inline std::atomic<size_t> heap_allocations{0};

} // namespace rdmactor::test

void* operator new(std::size_t n) {
  rdmactor::test::heap_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n))
    return p;
  throw std::bad_alloc{};
}

void operator delete(void* p) noexcept {
  std::free(p);
}

void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
