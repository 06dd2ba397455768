#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

/// Internal constants of the data path, side by side: batch sizes, the
/// "half the pool" rules and the signalling interval.  Not options: each is
/// a consequence of the credit protocol or a bound on work per activation;
/// change one only with the measurement that justifies it (docs/benchmarks.md)
/// and the tests of the rule it belongs to.
namespace rdmactor::tuning {

// -- transport (scheduling/transport_actor.cpp) -------------------------------

/// Completions taken per `poll_cq` call.
constexpr size_t cq_batch = 32;

/// A polling transport actor yields its core (`sched_yield`) after this
/// many empty polls in a row.  Yielding on every empty poll made an 8 B
/// actor ping-pong bimodal on 2 cores (p50 24 or 45 us a half round trip,
/// run to run: two spinning workers handing one core back and forth);
/// never yielding slowed the test suites by a third (a spinning worker
/// keeps other threads off its core).  docs/benchmarks.md, "The owner
/// reads the socket".
constexpr uint32_t empty_polls_per_yield = 16;

/// A polling transport actor with nothing in flight reads the clock for
/// its `poll-budget-us` only every this many polls; completions and posts
/// in between only mark activity, stamped at the next reading.  The budget
/// may run this many polls long.  In the Soft-RoCE VM the clock source is
/// the HPET and one `steady_clock::now()` is a system call of ~3 us, read
/// on every poll it was the top symbol of a raw ping-pong's profile (10 %);
/// docs/benchmarks.md, "The clock in the VM".
constexpr uint32_t polls_per_clock_read = 16;

/// Contention (scheduling/contention.hpp): a polling link owner reads its
/// thread's scheduler statistics at most every this many microseconds,
/// process-wide.
constexpr uint32_t contention_sample_us = 1000;

/// The samples' moving average spans about this many milliseconds: a CPU
/// hog is noticed within a few windows, a burst of our own threads is not.
constexpr uint32_t contention_window_ms = 20;

/// A sample whose thread wanted a core for less than this (ran plus
/// waited, microseconds) says nothing.
constexpr uint32_t contention_min_sample_us = 50;

/// The share of the time our polling threads wanted a core that they
/// waited for one (moving average) from which polling owners stop
/// spinning, and below which they spin again.  On two cores: two nodes of
/// one process ping-ponging 0.2-0.4, a polling client and server process
/// 0.02, two CPU hogs 0.85-0.9 (docs/benchmarks.md, "Polling under
/// contention").
constexpr double contention_enter_share = 0.6;
constexpr double contention_leave_share = 0.45;

/// Work requests a link holds behind its doorbell at most
/// (`link::hold_posts`): the next post rings it and holds again, so that a
/// long burst reaches the peer in pieces it can start on while the rest is
/// posted (eRPC's transmit batch is 32; 16 keeps a window of 32 messages
/// in two pieces).
constexpr size_t doorbell_batch = 16;

/// Header buffers a link keeps for reuse (`link::take_header_buffer`): a
/// steady stream of sends takes one back per post, and a burst that waited
/// for credits returns at most this many (each about 64 bytes).
constexpr size_t spare_header_buffers = 16;

/// Packed sends (`link::pack_sends`, EXT_PACKED_FRAMES): a send nobody
/// waits for of at most `pack_frame_max_bytes` (header and payload) may
/// share one message with the sends queued next to it, copied into one of
/// `pack_buffers` registered buffers of the peer's receive size each
/// (allocated at the first pack, so an idle connection has none); a
/// larger one goes alone, zero copy.  A lone send never waits for company.
constexpr size_t pack_frame_max_bytes = 1024;
constexpr size_t pack_buffers = 8;

/// Frames one packed message carries at most, both ways: the sender packs
/// no more, and the receiver refuses the frames beyond (a violation), so
/// one receive granted to a peer makes us answer at most this many
/// requests, as one receive made us answer one before packing.
constexpr size_t max_packed_frames = 64;

/// Operations that may wait for credits or send-queue entries; more fail
/// with quota_exceeded (a bound on memory, far above any sane pipeline).
constexpr size_t max_queued_ops = size_t{1} << 20;

/// Messages nobody waits for (the agent's posts: its requests, replies and
/// actor messages) that may wait for credits on one link; one more fails
/// the link with quota_exceeded.  What the agent queues for a local user
/// is bounded far below by its own limits (peer-max-pending-requests,
/// actor-window-*, the SendData window), so this bounds what a peer makes
/// us queue by taking none of our replies while it keeps sending requests
/// within its credits (a peer beyond its credits is cut off at once:
/// credit_ledger).  At most about 25 MiB per link (256-byte headers;
/// replies are far smaller).
constexpr size_t max_queued_posts = size_t{1} << 16;

/// Proxies of one peer's actors that a connection holds (senders of its
/// messages and actors its handles name; each a small actor that lives
/// until the peer says its actor ended or the connection goes); a message
/// that would need one more is refused with quota_exceeded.  Bounds what
/// a peer that names ever new actor ids makes us hold (a proxy is about
/// 300 bytes).
constexpr size_t max_peer_proxies = size_t{1} << 16;

/// Bytes preallocated per receive slot for the shared-pointer control block
/// and `mr_block` of the message it holds (no allocation per receive).
constexpr size_t slot_block_bytes = 256;

/// Header slots a link registers at a time (256 B each), first when it
/// opens and then as sends need more, up to one per send-queue entry.
constexpr uint32_t header_slot_chunk = 32;

/// Send-queue entries of a connection with `recv_depth` receives: one per
/// credit each way, plus credit-only messages.
constexpr uint32_t send_queue_depth(uint32_t recv_depth) {
  return 2 * recv_depth + 2;
}

/// Sends and writes are signaled at least every this many (a quarter of
/// the send queue, 1..16), so unsignaled entries never fill it.
constexpr uint32_t signal_every(uint32_t send_queue_depth) {
  return std::clamp<uint32_t>(send_queue_depth / 4, 1, 16);
}

/// Reposted receives are reported in a credit-only message once half the
/// pool is owed (and nothing queued will carry them): credit messages then
/// never answer each other.
constexpr uint32_t credit_return_threshold(uint32_t recv_depth) {
  return std::max<uint32_t>(1, recv_depth / 2);
}

// -- agent (actors/connection/agent_*.cpp) ------------------------------------

/// Bytes of actor messages an agent delivers in one activation before it
/// gives its worker back (after the message that crossed it).  Each was
/// just deserialized into fresh heap memory that its target frees; a batch
/// of them (up to `scheduler.max-throughput` per activation) consolidates
/// into a free block that glibc returns to the kernel, and the next batch
/// faults its pages in again: at 64 KiB messages that was a third of the
/// CPU and halved the throughput (docs/benchmarks.md, "An agent that
/// yields").  Yielding lets the target run and free before the next.
constexpr size_t agent_yield_after_bytes = size_t{64} << 10;

/// SendData chunks in flight per call: half the peer's receive pool, enough
/// to keep the link busy while the other half stays free for other
/// requests and their answers.
constexpr size_t send_data_window(uint32_t recv_depth) {
  return std::max<size_t>(1, recv_depth / 2);
}

/// Received chunks stay zero-copy views of the receive buffer while fewer
/// than half of the pool's buffers are held (by users, or anything else
/// that keeps a received message; the frame being handled not counted);
/// beyond, they are copied out so the peer keeps its send credits.
constexpr bool zero_copy_receive(uint32_t held_buffers, uint32_t recv_depth) {
  return held_buffers < recv_depth / 2;
}

/// Finished send_data streams whose memory a connection keeps for the
/// next calls (data_channel): as many as may run at once in a steady
/// stream of small sends.
constexpr size_t recycled_streams = 64;

/// SendData requests acknowledged by one cumulative SendDataResponse (its
/// request_id plus also_acked); the encoded response stays a header-only
/// send (max_send_header_bytes, checked by protocol/codec_test).
constexpr size_t max_acks_per_response = 16;

/// The keepalive timer (actors/connection/keepalive_timer.hpp) rounds a
/// connection's deadlines up to a tick of keepalive-ms /
/// `keepalive_ticks_per_period`, at least `keepalive_min_tick_ms` and at most
/// `keepalive_max_tick_ms`, so that the connections due in one tick share a
/// wake-up of its thread, and their Pings leave, and the peers' Pongs arrive,
/// in bursts that the fabric's threads serve in one wake-up each.  1000 idle
/// soft peers, two processes on the 2-core VM: 7.5-8.3 % of a core per side
/// with ticks of 10 ms, 5.2-5.8 % with 100 ms (docs/benchmarks.md, "Idle
/// peers").
constexpr uint32_t keepalive_ticks_per_period = 50;
constexpr uint32_t keepalive_min_tick_ms = 10;
constexpr uint32_t keepalive_max_tick_ms = 100;

/// Timed-out AllocMR ids remembered (a late OK answer to one is released at
/// once; older ones are released with the connection).
constexpr size_t max_late_allocs = 1024;

/// Timed-out request ids remembered: a response to one is late, not noise
/// (it does not count into peer-max-noise).  Bounded like max_late_allocs.
constexpr size_t max_late_responses = 4096;

// -- heap (common/heap_trim.hpp) ----------------------------------------------

/// The heap trimmer (`heap_trim_pacer`) trims at most once per
/// `heap_trim_gap_ms`, and waits `heap_trim_duty` times as long as its
/// last trim took when that is longer: at most a tenth of a core.  One
/// trim per teardown cost a node that dropped 10,000 peers a core for the
/// whole teardown (malloc_trim walks every arena and madvises each free
/// range, also the ones it returned before: a quarter of the client's CPU
/// in `rdmactor-bench --op=connect --peers=10000`); docs/benchmarks.md,
/// "Teardown".
constexpr uint32_t heap_trim_gap_ms = 100;
constexpr uint32_t heap_trim_duty = 10;

// -- logging (common/rate_limiter.hpp) ----------------------------------------

/// Lines that all peers together may trigger per window, per shared budget
/// (`shared_log_budget`), on top of each peer's peer-max-log-lines: a node
/// with many noisy peers writes at most this many such lines per window.
constexpr uint64_t shared_log_lines = 200;
constexpr uint64_t shared_log_window_ms = 10000;

/// The agent's sweep for expired requests runs every twentieth of the
/// request timeout, within [1, 100] ms.
constexpr uint64_t sweep_interval_ms(uint64_t request_timeout_ms) {
  return std::clamp<uint64_t>(request_timeout_ms / 20, 1, 100);
}

/// The holder of a leased region stops using it this long before the
/// lease ends by its own clock (a quarter of the lease, at most 1 s): the
/// lender counts from when it lent (or renewed), earlier than the holder
/// learned of it, and an operation that starts just before the holder's
/// end must finish before the lender revokes the registration.
constexpr uint64_t lease_margin_ms(uint64_t lease_ms) {
  return std::min<uint64_t>(lease_ms / 4, 1000);
}

static_assert(credit_return_threshold(4) == 2,
              "the smallest pool returns credits in pairs");
static_assert(signal_every(send_queue_depth(4)) >= 1
                  && signal_every(send_queue_depth(4)) < send_queue_depth(4),
              "a signaled completion always comes before the queue fills");

} // namespace rdmactor::tuning
