#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "common/ring_deque.hpp"
#include "transport/soft/deadline.hpp"
#include "transport/soft/faults.hpp"
#include "transport/soft/registration.hpp"
#include "transport/soft/wire.hpp"

namespace rdmactor::transport::soft {

/// The outbound half of a queue pair's connection: a FIFO of frames written
/// to the socket without ever blocking.
///
/// `pump` writes as much as the socket takes and stops when the socket is
/// full, a frame is held back by a delay fault, or a fault drops the
/// connection.  One `sendmsg` gathers every queued frame (headers and
/// payload ranges: zero copy), up to `limits::gather_frames` frames and
/// `limits::gather_bytes` bytes, so a burst of small frames costs one
/// system call.  Payload memory is touched only under the shared
/// lock of its registration.  The owner serializes every call (the queue
/// pair's mutex).
class outbound_stream {
public:
  /// Why `pump` stopped.
  enum class pump_status {
    idle,         ///< everything was written
    blocked,      ///< the socket is full: poll for POLLOUT
    delayed,      ///< the head frame is held back until `release_time()`
    dropped,      ///< a fault dropped the connection
    failed,       ///< the socket failed (`error` holds errno)
    unregistered, ///< payload memory was deregistered while queued
  };

  /// What one `pump` did.
  struct pump_result {
    pump_status status = pump_status::idle;
    /// Request frames (send, write, read) written completely.
    size_t requests_written = 0;
    size_t bytes = 0;
    /// `sendmsg` calls that wrote something.
    size_t writes = 0;
    int error = 0;
  };

  /// Appends a frame: assigns its sequence number and encodes `h`.  The
  /// payload ranges must cover `wire::payload_bytes(h)` bytes, except for
  /// the frames of atomics (requests and responses), whose payload is
  /// `inline_bytes[0..wire::payload_bytes(h))`, copied.
  void push(wire::header h, const range_list& payload, time_point now,
            const uint8_t* inline_bytes = nullptr);

  /// Writes frames until done or stopped; see `pump_status`.
  pump_result pump(int fd, time_point now);

  /// Drops every frame on error.  With `keep_responses`, keeps the
  /// responses (ack, nak, read_response) and renumbers them, unless a frame
  /// is partly written (then everything goes).  Returns true when the
  /// stream is still intact (frames may follow).
  bool abort(bool keep_responses);

  /// Returns true when no frame is queued.
  bool empty() const noexcept {
    return frames_.empty();
  }

  /// Returns true when the last `pump` stopped at a full socket.
  bool blocked() const noexcept {
    return blocked_;
  }

  /// Returns when the head frame may go (delay fault), if it is held back.
  std::optional<time_point> release_time() const noexcept;

  /// Returns the queued responses (acks, naks, read responses).
  size_t responses() const noexcept {
    return responses_;
  }

  /// Applies a fault plan; its counters start now.
  void set_faults(const fault_plan& plan) noexcept;

private:
  struct frame {
    wire::header hdr;
    /// The header, then the inline payload of an atomic frame.
    std::array<uint8_t, wire::header_size + wire::atomic_operand_bytes> bytes;
    size_t bytes_len = wire::header_size;
    range_list payload;
    uint64_t total = 0;
    uint64_t sent = 0;
    time_point not_before;
    bool corrupted = false;
  };

  ring_deque<frame> frames_;
  uint32_t next_seq_ = 0;
  size_t responses_ = 0;
  bool blocked_ = false;
  fault_plan faults_;
  uint64_t fault_bytes_ = 0;
  uint64_t fault_frames_ = 0;
};

} // namespace rdmactor::transport::soft
