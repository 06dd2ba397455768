#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace rdmactor::bench {

/// The operation a run measures.
enum class bench_op {
  send,      ///< connection send_data, pushed to the peer's data subscriber
  write,     ///< connection write to a remote_mr (one-sided)
  read,      ///< connection read from a remote_mr (one-sided)
  raw,       ///< transport actor send, no agent (header + payload per message)
  fetch_add, ///< connection fetch_add on a word of a remote_mr (8 bytes)
  cas,       ///< connection compare_swap on a word of a remote_mr (8 bytes)
  connect,   ///< --peers connections opened, held, echoed once, closed
  actor,     ///< remote actors: ping-pong / pushes of a std::vector<uint8_t>
             ///< to a published actor through its proxy (caf-io: the same)
};

/// True for fetch_add and cas (one 8-byte word per operation).
constexpr bool is_atomic(bench_op x) noexcept {
  return x == bench_op::fetch_add || x == bench_op::cas;
}

/// How a run drives its operation.
enum class bench_mode {
  lat, ///< one operation at a time (ping-pong for send and raw)
  bw,  ///< a window of outstanding operations
};

/// Returns "send", "write", "read", "raw", "fetch_add", "cas" or "connect".
const char* to_string(bench_op x) noexcept;

/// Returns "lat" or "bw".
const char* to_string(bench_mode x) noexcept;

/// Parses an operation name; returns false for an unknown name.
bool parse_op(const std::string& str, bench_op& out) noexcept;

/// Parses a mode name; returns false for an unknown name.
bool parse_mode(const std::string& str, bench_mode& out) noexcept;

/// What one run (one operation, mode and size) does.
struct run_spec {
  bench_op op = bench_op::send;
  bench_mode mode = bench_mode::lat;
  /// Payload bytes per operation (per ping for send and raw).
  uint64_t size = 8;
  /// Measured operations (round trips in ping-pong).
  uint64_t iters = 1000;
  /// Operations before the measurement starts.
  uint64_t warmup = 100;
  /// Outstanding operations in bw mode (1 in lat mode).
  uint32_t window = 32;
  /// Timeout of every request the driver makes.
  std::chrono::milliseconds op_timeout{30000};
  /// send, write and read: the operations go from a data handler in
  /// the client's agent, not from the driver actor (the default;
  /// --actor-driver turns it off; handler_driver.hpp).
  bool in_handler = true;
};

/// Flag byte that asks the bench server to echo a message (first payload
/// byte of every send chunk, first header byte of a raw message).
constexpr uint8_t echo_flag = 1;

/// Flag byte that asks the bench server to drop a message.
constexpr uint8_t sink_flag = 0;

/// Header bytes of every raw message (the flag and padding).
constexpr size_t raw_header_bytes = 8;

} // namespace rdmactor::bench
