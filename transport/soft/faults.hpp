#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include <caf/error.hpp>

#include "rdmactor/transport/fabric.hpp"

/// Fault injection of the soft fabric, for reliability tests.
///
/// A `fault_plan` acts on the outbound stream of a queue pair: the frames
/// (requests and responses) it writes after the handshake.  Counting starts
/// when the plan is applied.
namespace rdmactor::transport::soft {

/// Faults to inject into the outbound stream of a queue pair.  The default
/// plan injects nothing.
struct fault_plan {
  /// Drop the connection once this many bytes went out: the queue pair
  /// writes up to that byte, then, when it has more to write, shuts the
  /// socket down and enters the error state (outstanding work flushes).
  /// The peer sees the connection end, possibly in the middle of a frame,
  /// and flushes too.  0 drops at the first byte.
  std::optional<uint64_t> drop_after_bytes;

  /// Hold every outbound frame for this long before writing it (latency;
  /// order is kept).  Posting never blocks on the delay.
  std::chrono::milliseconds delay{0};

  /// Damage the header of the Nth outbound frame (1 = the first).  The peer
  /// detects a protocol violation, logs it and closes the connection; both
  /// sides enter the error state.
  std::optional<uint64_t> corrupt_frame;
};

/// Sets the plan that queue pairs created afterwards by `dev` start with
/// (by `connect` and by `accept` on its listeners).  Thread-safe.  Fails
/// with `invalid_argument` when `dev` is not a soft device.
caf::error set_faults(device& dev, const fault_plan& plan);

/// Replaces the plan of a live queue pair; its counters start at zero.
/// Thread-safe.  Fails with `invalid_argument` when `qp` is not a soft
/// queue pair.
caf::error set_faults(queue_pair& qp, const fault_plan& plan);

/// How many inbound requests `qp` holds for want of a posted receive (see
/// "Responder" in soft_queue_pair.hpp): for tests that must know that the
/// peer's SENDs arrived before they post the receives.  Thread-safe.  0 when
/// `qp` is not a soft queue pair.
size_t waiting_for_receive(const queue_pair& qp);

/// How many inbound frames the owner of `qp` read itself, in `progress`
/// while it polled (the rest were read by the event loop): for tests of
/// who reads.  Thread-safe.  0 when `qp` is not a soft queue pair.
uint64_t frames_read_by_owner(const queue_pair& qp);

/// How many `sendmsg` calls wrote frames of `qp` (one gathers every frame
/// queued then): for tests of batching (`queue_pair::hold_doorbell`).
/// Thread-safe.  0 when `qp` is not a soft queue pair.
uint64_t socket_writes(const queue_pair& qp);

/// How many reads of `qp`'s socket found nothing (EAGAIN): for tests that a
/// reader stops at a short read instead of asking an empty socket again.
/// Thread-safe.  0 when `qp` is not a soft queue pair.
uint64_t empty_socket_reads(const queue_pair& qp);

} // namespace rdmactor::transport::soft
