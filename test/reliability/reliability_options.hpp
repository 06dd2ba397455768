#pragma once

// Options shared by reliability_test and its peer process, so that both
// sides offer the same connection parameters and limits.

#include <cstdint>

#include "test/actors/fixture.hpp"

namespace rdmactor::test {

/// Bytes of the one-sided stream in the "peer killed" cases.
constexpr uint64_t stream_bytes = 100ull << 20;

/// Bytes of one send_data in the "peer killed" cases: many chunks.
constexpr uint64_t send_data_bytes = 32ull << 20;

/// The test fixture's options with messages of 64 KiB (a 32 MiB send_data
/// is 513 chunks) and room for 100 MiB regions.
inline options reliability_options() {
  auto o = test_options();
  o.max_message_len_bytes = 64 * 1024;
  o.recv_depth = 16;
  o.request_timeout_ms = 5000 * timeout_scale();
  o.arena_size_bytes = 4 << 20;
  o.max_alloc_bytes = 256ull << 20;
  o.peer_max_alloc_bytes = 160ull << 20;
  o.peer_max_mrs = 64;
  o.peer_max_queued_bytes = 64ull << 20;
  o.peer_max_violations = 16;
  return o;
}

} // namespace rdmactor::test
