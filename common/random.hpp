#pragma once

// Random numbers for ids (request ids, keepalive staggering).  Not
// installed.

#include <cstdint>

namespace rdmactor {

/// A random 64-bit value from a generator of the calling thread, seeded
/// once per thread from `std::random_device`: callers keep no generator
/// of their own (a `std::mt19937_64` is 2.5 KiB, and a `random_device`
/// read per connection showed in the profile of 19,000 connects).  Not
/// for secrets.
uint64_t random_u64() noexcept;

} // namespace rdmactor
