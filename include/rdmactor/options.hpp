#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace caf {
class config_option_set;
} // namespace caf

namespace rdmactor {

/// Every tunable of rdmactor, with its unit in its name.
///
/// Defaults are documented in `config/rdmactor.ini`, which mirrors this
/// struct one to one.  `add_options` binds the fields to a CAF option set so
/// that the ini file (section `[rdmactor]`) and the command line
/// (`--rdmactor.max-message-len-bytes=...`) set them.
struct options {
  // -- fabric selection -----------------------------------------------------
  /// "soft" (TCP model), "verbs" (rdma-core) or "auto" (verbs when an RDMA
  /// device exists, soft otherwise).
  std::string fabric = "auto";
  /// verbs: device name as `ibv_devices` prints it; empty = first device.
  std::string device;
  /// verbs: port number; 0 = first active port.
  uint32_t port = 0;
  /// verbs: GID index; -1 = automatic (RoCE v2 IPv4-mapped GID when on
  /// Ethernet, index 0 on InfiniBand).
  int32_t gid_index = -1;

  // -- connection parameters (negotiated: each side takes the minimum) ------
  /// Largest message (frame header + Message + payload) on the wire.
  uint32_t max_message_len_bytes = 64 * 1024;
  /// Credits of the peer: receives it may use before we report some free
  /// again; without a shared receive queue also the receive buffers posted
  /// per connection (63 x 4160 B = 255.9 KiB registered per connection).
  uint32_t recv_depth = 63;
  /// Size of each receive buffer (the eager size): the largest frame a peer
  /// may SEND us, offered to the transport instead of max_message_len_bytes
  /// when smaller.  Payloads that do not fit go by rendezvous to peers whose
  /// Hello offers it (the receiver reads them with RDMA READ, in pieces of
  /// up to its max_rendezvous_bytes) and in eager-sized chunks to peers that
  /// do not.
  /// >= max_message_len_bytes: no rendezvous, buffers of max_message_len_bytes
  /// (the behaviour before it existed).  4160 = a 4 KiB payload plus room
  /// for its frame header: a rendezvous costs a READ round trip and a
  /// registration, which at 4 KiB halved the throughput (docs/benchmarks.md,
  /// "Eager buffers and rendezvous").
  uint32_t eager_message_len_bytes = 4160;
  /// Largest rendezvous piece a peer may ask us to read (one RDMA READ into
  /// memory we allocate for it, counted against peer_max_queued_bytes while
  /// in flight), offered in our Hello; a larger one is refused.  Each piece
  /// costs a request, a READ and an answer: 1 MiB pieces moved 1 MiB sends
  /// half as fast again as 64 KiB ones on soft (docs/benchmarks.md,
  /// "Rendezvous pieces").  Used only while rendezvous is on
  /// (eager_message_len_bytes < max_message_len_bytes).
  uint32_t max_rendezvous_bytes = 1024 * 1024;
  /// Connections take their receives from one shared receive queue per
  /// device (`ibv_create_srq`; the soft fabric models it) instead of
  /// `recv_depth` buffers each: registered receive memory grows with
  /// traffic, not with peers (docs/architecture.md, "Shared receives").
  /// Each peer still gets `recv_depth` credits.
  bool shared_receive_queue = true;
  /// Shared receive queue: buffers registered at once, first and whenever
  /// fewer than half as many are left posted.
  uint32_t srq_chunk_receives = 64;
  /// Shared receive queue: buffers at most (then a SEND waits for one, up
  /// to the RNR timeout).
  uint32_t srq_max_receives = 16384;

  // -- timeouts -------------------------------------------------------------
  /// Upper bound for every request to the peer or the fabric.
  uint32_t request_timeout_ms = 10000;
  /// Upper bound for establishing a connection (resolve + handshake).
  uint32_t connect_timeout_ms = 5000;
  /// How long a SEND waits for a posted receive before RNR retry exceeded.
  uint32_t rnr_timeout_ms = 2000;
  /// Keepalive (0 = off): after this long without any frame from the peer
  /// node (on any of this node's connections to it) one connection sends
  /// it a Ping; if again nothing arrives within this long, every
  /// connection to that node ends with peer_gone.  So a peer that froze or
  /// died while idle is noticed within 2 x keepalive-ms (plus a few ms of
  /// timer latency), at one Ping per keepalive-ms per peer node.  Only
  /// peers whose Hello offers keepalive are pinged; any frame counts as a
  /// sign of life, so busy connections send no pings.
  uint32_t keepalive_ms = 5000;
  /// Graceful close: how long the closing side keeps its queue pair open
  /// after posting Goodbye, waiting for the peer to close its side, before
  /// it tears it down anyway.
  uint32_t close_timeout_ms = 2000;

  // -- execution ------------------------------------------------------------
  /// soft: event loop threads per device that play the NIC for every
  /// connection of the device.  (verbs always runs one completion-event
  /// thread per device.)  A node's thread count does not grow with peers.
  uint32_t engine_threads = 1;
  /// How a connection's link owner learns of completions: "event"
  /// (arm the CQ, wake on its event), "busy" (poll forever: dedicated
  /// cores) or "adaptive" (poll while operations are outstanding and for
  /// poll_budget_us after the last completion, then arm; as "event" while
  /// other programs contend for the cores).  Polling needs a
  /// bounded `scheduler.max-throughput`, which `rdmactor::config` sets.
  std::string completion_mode = "adaptive";
  /// adaptive: how long to keep polling after the last completion.
  uint32_t poll_budget_us = 1000;
  /// When a node opens, raise this process's soft open-files limit
  /// (RLIMIT_NOFILE) to min(hard limit, this), so that the usual default of
  /// 1024 does not cap the number of connections (each soft connection is
  /// one socket); never lowers it.  0 = leave the limit alone.
  uint64_t open_files_limit = uint64_t{1} << 20;

  // -- allocator ------------------------------------------------------------
  /// Size of one registered arena; larger allocations get their own.
  uint64_t arena_size_bytes = 16 * 1024 * 1024;
  /// Largest single allocation (local or on behalf of a peer).
  uint64_t max_alloc_bytes = 1024ull * 1024 * 1024;

  // -- per-peer limits (a peer over a limit gets QUOTA_EXCEEDED answers;
  //    after peer_max_violations refusals in a row, or peer_max_noise in a
  //    window, it is disconnected) -----------------------------------------
  /// Bytes a peer may have allocated on our side (AllocMR) at once.
  uint64_t peer_max_alloc_bytes = 256ull * 1024 * 1024;
  /// Memory regions a peer may have allocated on our side at once.
  uint32_t peer_max_mrs = 4096;
  /// Bytes of local memory one connection may hold through alloc_for_peer
  /// at once: what the app allocates because the peer asked (to read a
  /// region it lends, whatever length it claims).
  uint64_t peer_max_claim_bytes = 64ull * 1024 * 1024;
  /// The memory budget of one peer's inbound bytes: everything its frames
  /// make this node hold at once (SendData bytes not yet claimed by
  /// receive_data, rendezvous READs in flight and the chunks and actor
  /// messages waiting behind them, the chunked actor message being
  /// reassembled).  What would go over it is refused with QUOTA_EXCEEDED
  /// (a violation); a chunked actor message that outgrows it is dropped
  /// and its requester answered with the error.
  uint64_t peer_max_queued_bytes = 64ull * 1024 * 1024;
  /// Deadline of every partial piece of work a peer started, in ms from
  /// when it started: a chunked actor message whose last chunk has not
  /// arrived, a rendezvous READ of its memory that has not completed.
  /// Other frames (Pings, requests, chunks of other messages) do not
  /// extend it.  A partial message past it is dropped (its requester
  /// answered with `request_timeout`, a violation); a READ past it ends
  /// the connection (the memory it reads into stays the READ's until the
  /// queue pair is gone).
  uint32_t peer_partial_timeout_ms = 30000;
  /// Memory-region tokens from the peer not yet claimed.
  uint32_t peer_max_queued_mrs = 1024;
  /// Immediate values from the peer (write_with_imm notifications, send_data
  /// chunks with a value) not yet claimed by receive_imm; more are dropped
  /// and counted as protocol noise.
  uint32_t peer_max_queued_imms = 4096;
  /// Our requests to one peer waiting for an answer.
  uint32_t peer_max_pending_requests = 4096;
  /// Refused requests or malformed frames in a row before disconnecting.
  uint32_t peer_max_violations = 64;
  /// Protocol noise a peer may send per peer-noise-window-ms before it is
  /// disconnected: refused requests, malformed frames and what is not an
  /// error on its own (responses to ids we never used, acknowledgements of
  /// unknown requests).  Unlike peer_max_violations, accepted requests do
  /// not reset it.  A late response to a request that timed out is not
  /// noise.
  uint32_t peer_max_noise = 10000;
  uint32_t peer_noise_window_ms = 10000;
  /// Largest remote-actor message (its CAF serialization) sent or taken,
  /// in bytes: larger ones go in chunks of the max message length; over
  /// this limit sending fails with `size_limit` and a peer that announces
  /// more is refused (a violation).  The receiver buffers at most one such
  /// message per connection while its chunks arrive.
  uint64_t actor_max_message_bytes = 64ull * 1024 * 1024;
  /// Requests through the proxies of one connection waiting for the remote
  /// actor's response; over it a request fails at once with
  /// `quota_exceeded`.
  uint32_t peer_max_actor_requests = 4096;
  /// Backpressure for remote-actor messages: the window of a peer's actor
  /// messages (requests and plain sends; responses and down notices do
  /// not count) that this node takes before it returns credit, in
  /// messages and in bytes of their serialization.  Credit returns (an
  /// ActorAck) once the target actor took the message from its mailbox, so
  /// a slow actor slows its senders.  Announced in Hello (EXT_ACTOR_FLOW);
  /// a peer without it that exceeds the window is disconnected.  A message
  /// larger than the bytes window still goes while less than half of it is
  /// in flight.
  uint32_t actor_window_messages = 256;
  uint64_t actor_window_bytes = 8ull * 1024 * 1024;
  /// Bytes of actor messages one connection keeps queued on the sending
  /// side while the peer's window is full; over it a request fails at
  /// once with `quota_exceeded` and a plain send is dropped (logged,
  /// rate-limited; counted in agent_stats::actor_send_refused).
  uint64_t actor_send_queue_bytes = 64ull * 1024 * 1024;

  // -- extensions offered in Hello ------------------------------------------
  /// Offer immediate data to peers (write_with_imm, send_data with a
  /// value).  Off: a peer's write_with_imm and send_data with a value fail
  /// on its side with `not_negotiated`.
  bool immediate_data = true;
  /// Lease on the regions a peer allocates here (request_remote_mr), in
  /// ms: unless the peer renews it, the region is revoked and freed then,
  /// even if the peer never releases it.  0: no lease.  Only for peers
  /// whose Hello offers leases; others get regions without one.
  uint32_t peer_alloc_lease_ms = 0;
  /// Offer remote actors to peers (lookup of published actors, actor
  /// messages).  Off: peers' lookups fail on their side with
  /// `not_negotiated`, and nothing published here is reachable.
  bool remote_actors = true;
  /// Offer credit-based flow control of actor messages (EXT_ACTOR_FLOW,
  /// with actor-window-*).  Off (for tests and old peers' behaviour): the
  /// peer sends actor messages without a window, and this node still
  /// disconnects it when more than actor-window-* of them wait in its
  /// actors' mailboxes.
  bool actor_flow = true;

  // -- verbs QP attributes --------------------------------------------------
  /// Path MTU in bytes (256..4096); 0 = the port's active MTU.
  uint32_t verbs_mtu_bytes = 0;
  /// Local ACK timeout exponent: 4.096 us * 2^x (ibv_qp_attr.timeout).
  uint32_t verbs_timeout_exp = 14;
  /// Transport retry count (0..7).
  uint32_t verbs_retry_count = 7;
  /// RNR retry count (0..7).  7 ("infinite" in verbs) is bounded here:
  /// the wait is derived from rnr_timeout_ms (at most about 3.9 s).
  uint32_t verbs_rnr_retry = 7;
  /// Minimum RNR NAK timer code (ibv_qp_attr.min_rnr_timer, 0..31).
  uint32_t verbs_min_rnr_timer = 12;

  // -- logging --------------------------------------------------------------
  /// spdlog level: trace, debug, info, warn, error, off.
  std::string log_level = "info";
  /// Log lines one peer's frames may trigger per peer-log-window-ms
  /// (refusals, dropped responses, malformed frames); more are counted and
  /// reported as "N similar lines suppressed".  All peers together are
  /// bounded too (tuning::shared_log_lines).
  uint32_t peer_max_log_lines = 20;
  uint32_t peer_log_window_ms = 10000;
};

/// Bytes of each receive buffer a node offers and registers: the eager
/// size, or the max message length when that is smaller.
inline uint32_t receive_buffer_bytes(const options& o) noexcept {
  return o.eager_message_len_bytes < o.max_message_len_bytes
             ? o.eager_message_len_bytes
             : o.max_message_len_bytes;
}

/// Binds every field of `opts` to the option set `set` under the category
/// "rdmactor".  `opts` must outlive the parsing of the configuration.  Use
/// `rdmactor::config` (rdmactor/config.hpp), which does this for you.
void add_options(caf::config_option_set& set, options& opts);

/// Checks the ranges of `opts`; returns an empty string when valid, else a
/// message that names the offending option and its valid range.
std::string validate(const options& opts);

} // namespace rdmactor
