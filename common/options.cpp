#include "rdmactor/options.hpp"

#include <caf/config_option_adder.hpp>
#include <caf/config_option_set.hpp>

namespace rdmactor {

void add_options(caf::config_option_set& set, options& o) {
  caf::config_option_adder{set, "rdmactor"}
      .add(o.fabric, "fabric", "soft, verbs or auto")
      .add(o.device, "device", "verbs device name (empty: first)")
      .add(o.port, "port", "verbs port (0: first active)")
      .add(o.gid_index, "gid-index", "verbs GID index (-1: automatic)")
      .add(o.max_message_len_bytes, "max-message-len-bytes",
           "largest message on the wire in bytes")
      .add(o.recv_depth, "recv-depth", "receive buffers per connection")
      .add(o.eager_message_len_bytes, "eager-message-len-bytes",
           "size of each receive buffer in bytes; larger payloads go by "
           "rendezvous (RDMA READ)")
      .add(o.max_rendezvous_bytes, "max-rendezvous-bytes",
           "largest rendezvous piece (one RDMA READ) a peer may ask us to "
           "read, in bytes")
      .add(o.shared_receive_queue, "shared-receive-queue",
           "connections share one receive queue per device")
      .add(o.srq_chunk_receives, "srq-chunk-receives",
           "shared receive queue: buffers registered at a time")
      .add(o.srq_max_receives, "srq-max-receives",
           "shared receive queue: buffers at most")
      .add(o.request_timeout_ms, "request-timeout-ms",
           "upper bound of every request in ms")
      .add(o.connect_timeout_ms, "connect-timeout-ms",
           "upper bound of connection setup in ms")
      .add(o.rnr_timeout_ms, "rnr-timeout-ms",
           "soft fabric: wait for a posted receive in ms")
      .add(o.keepalive_ms, "keepalive-ms",
           "ping a peer silent this long in ms; drop it if silent twice "
           "as long (0: off)")
      .add(o.close_timeout_ms, "close-timeout-ms",
           "graceful close: wait for the peer to close its side in ms")
      .add(o.engine_threads, "engine-threads",
           "threads per device serving every connection")
      .add(o.completion_mode, "completion-mode", "event, busy or adaptive")
      .add(o.poll_budget_us, "poll-budget-us",
           "adaptive: polling after the last completion in us")
      .add(o.open_files_limit, "open-files-limit",
           "raise the soft RLIMIT_NOFILE to min(hard, this) (0: leave it)")
      .add(o.arena_size_bytes, "arena-size-bytes",
           "size of one registered arena in bytes")
      .add(o.max_alloc_bytes, "max-alloc-bytes",
           "largest single allocation in bytes")
      .add(o.peer_max_alloc_bytes, "peer-max-alloc-bytes",
           "bytes one peer may have allocated here")
      .add(o.peer_max_mrs, "peer-max-mrs",
           "memory regions one peer may have allocated here")
      .add(o.peer_max_claim_bytes, "peer-max-claim-bytes",
           "memory allocated for one peer's claims (alloc_for_peer) in bytes")
      .add(o.peer_max_queued_bytes, "peer-max-queued-bytes",
           "bytes one peer's frames may make us hold (unclaimed data, "
           "rendezvous reads, partial actor messages)")
      .add(o.peer_partial_timeout_ms, "peer-partial-timeout-ms",
           "deadline of a peer's partial actor message or rendezvous read "
           "in ms from its start")
      .add(o.peer_max_queued_mrs, "peer-max-queued-mrs",
           "unclaimed memory-region tokens per peer")
      .add(o.peer_max_queued_imms, "peer-max-queued-imms",
           "unclaimed immediate values per peer")
      .add(o.peer_max_pending_requests, "peer-max-pending-requests",
           "our requests to one peer waiting for an answer")
      .add(o.peer_max_violations, "peer-max-violations",
           "refusals in a row before a peer is disconnected")
      .add(o.peer_max_noise, "peer-max-noise",
           "protocol noise per window before a peer is disconnected")
      .add(o.peer_noise_window_ms, "peer-noise-window-ms",
           "window of peer-max-noise in ms")
      .add(o.actor_max_message_bytes, "actor-max-message-bytes",
           "largest remote-actor message in bytes (larger go in chunks)")
      .add(o.peer_max_actor_requests, "peer-max-actor-requests",
           "requests to remote actors of one peer waiting for an answer")
      .add(o.actor_window_messages, "actor-window-messages",
           "actor messages a peer may have in flight to us (credit window)")
      .add(o.actor_window_bytes, "actor-window-bytes",
           "bytes of actor messages a peer may have in flight to us")
      .add(o.actor_send_queue_bytes, "actor-send-queue-bytes",
           "bytes of actor messages queued per peer while its window is full")
      .add(o.immediate_data, "immediate-data",
           "offer immediate data (write_with_imm) to peers")
      .add(o.peer_alloc_lease_ms, "peer-alloc-lease-ms",
           "lease on regions peers allocate here in ms (0: none)")
      .add(o.remote_actors, "remote-actors",
           "offer remote actors (lookup, actor messages) to peers")
      .add(o.actor_flow, "actor-flow",
           "offer credit flow control of actor messages to peers")
      .add(o.verbs_mtu_bytes, "verbs-mtu-bytes", "path MTU (0: port's active)")
      .add(o.verbs_timeout_exp, "verbs-timeout-exp", "ACK timeout exponent")
      .add(o.verbs_retry_count, "verbs-retry-count", "transport retries")
      .add(o.verbs_rnr_retry, "verbs-rnr-retry", "RNR retries (7: infinite)")
      .add(o.verbs_min_rnr_timer, "verbs-min-rnr-timer", "min RNR NAK timer")
      .add(o.log_level, "log-level", "trace, debug, info, warn, error, off")
      .add(o.peer_max_log_lines, "peer-max-log-lines",
           "log lines one peer may trigger per window")
      .add(o.peer_log_window_ms, "peer-log-window-ms",
           "window of peer-max-log-lines in ms");
}

std::string validate(const options& o) {
  if (o.fabric != "soft" && o.fabric != "verbs" && o.fabric != "auto")
    return "rdmactor.fabric must be soft, verbs or auto (got '" + o.fabric
           + "')";
  if (o.max_message_len_bytes < 256 || o.max_message_len_bytes > (1u << 30))
    return "rdmactor.max-message-len-bytes must be in [256, 2^30]";
  // 4: the transport's credit protocol needs it (min_recv_depth in
  // rdmactor/transport/link_params.hpp, which the handshakes check;
  // common/ does not depend on transport/).
  if (o.recv_depth < 4 || o.recv_depth > 16384)
    return "rdmactor.recv-depth must be in [4, 16384]";
  if (o.eager_message_len_bytes < 256 || o.eager_message_len_bytes > (1u << 30))
    return "rdmactor.eager-message-len-bytes must be in [256, 2^30]";
  // A piece is never smaller than an eager chunk (the receiver refuses
  // those: they would fit a SEND).
  if (o.eager_message_len_bytes < o.max_message_len_bytes
      && (o.max_rendezvous_bytes < o.eager_message_len_bytes
          || o.max_rendezvous_bytes > (1u << 30)))
    return "rdmactor.max-rendezvous-bytes must be in "
           "[eager-message-len-bytes, 2^30]";
  if (o.srq_chunk_receives < 4 || o.srq_chunk_receives > 65536)
    return "rdmactor.srq-chunk-receives must be in [4, 65536]";
  if (o.srq_max_receives < o.srq_chunk_receives
      || o.srq_max_receives > (1u << 20))
    return "rdmactor.srq-max-receives must be in [srq-chunk-receives, 2^20]";
  if (o.request_timeout_ms == 0)
    return "rdmactor.request-timeout-ms must be > 0";
  if (o.connect_timeout_ms == 0)
    return "rdmactor.connect-timeout-ms must be > 0";
  if (o.keepalive_ms != 0 && (o.keepalive_ms < 10 || o.keepalive_ms > 3600000))
    return "rdmactor.keepalive-ms must be 0 (off) or in [10, 3600000]";
  if (o.peer_partial_timeout_ms == 0 || o.peer_partial_timeout_ms > 3600000)
    return "rdmactor.peer-partial-timeout-ms must be in [1, 3600000]";
  if (o.close_timeout_ms == 0 || o.close_timeout_ms > 600000)
    return "rdmactor.close-timeout-ms must be in [1, 600000]";
  if (o.engine_threads == 0 || o.engine_threads > 64)
    return "rdmactor.engine-threads must be in [1, 64]";
  if (o.completion_mode != "event" && o.completion_mode != "busy"
      && o.completion_mode != "adaptive")
    return "rdmactor.completion-mode must be event, busy or adaptive (got '"
           + o.completion_mode + "')";
  if (o.poll_budget_us > 1000000)
    return "rdmactor.poll-budget-us must be in [0, 1000000]";
  if (o.arena_size_bytes < 4096)
    return "rdmactor.arena-size-bytes must be >= 4096";
  if (o.max_alloc_bytes == 0)
    return "rdmactor.max-alloc-bytes must be > 0";
  if (o.peer_max_claim_bytes == 0)
    return "rdmactor.peer-max-claim-bytes must be > 0";
  if (o.peer_max_mrs == 0 || o.peer_max_queued_mrs == 0
      || o.peer_max_queued_imms == 0 || o.peer_max_pending_requests == 0
      || o.peer_max_violations == 0 || o.peer_max_noise == 0
      || o.peer_max_actor_requests == 0 || o.actor_max_message_bytes == 0
      || o.actor_window_messages == 0 || o.actor_window_bytes == 0
      || o.actor_send_queue_bytes == 0)
    return "rdmactor.peer-max-* and actor-* limits must be > 0";
  if (o.peer_noise_window_ms == 0 || o.peer_log_window_ms == 0)
    return "rdmactor.peer-noise-window-ms and rdmactor.peer-log-window-ms "
           "must be > 0";
  if (o.verbs_mtu_bytes != 0 && o.verbs_mtu_bytes != 256
      && o.verbs_mtu_bytes != 512 && o.verbs_mtu_bytes != 1024
      && o.verbs_mtu_bytes != 2048 && o.verbs_mtu_bytes != 4096)
    return "rdmactor.verbs-mtu-bytes must be 0, 256, 512, 1024, 2048 or 4096";
  if (o.verbs_timeout_exp > 31 || o.verbs_retry_count > 7
      || o.verbs_rnr_retry > 7 || o.verbs_min_rnr_timer > 31)
    return "rdmactor.verbs-* values out of range (timeout-exp, min-rnr-timer "
           "<= 31; retry-count, rnr-retry <= 7)";
  return {};
}

} // namespace rdmactor
