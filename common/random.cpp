#include "common/random.hpp"

#include <random>

namespace rdmactor {

uint64_t random_u64() noexcept {
  thread_local std::mt19937_64 engine{[] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) | rd();
  }()};
  return engine();
}

} // namespace rdmactor
