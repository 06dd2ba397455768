#pragma once

// The counters of one agent, a plain value (CAF-free: agent_core fills
// them, the agent actor reports them through its stats request).

#include <cstdint>

namespace rdmactor {

/// Counters of one agent (for tests, diagnostics and limits).
struct agent_stats {
  /// Memory regions kept alive for the peer (AllocMR'd or sent to it).
  uint64_t owned_mrs = 0;
  /// Requests to the peer waiting for their response.
  uint64_t pending_requests = 0;
  /// Received data chunks and MRs not yet taken by a receive call.
  uint64_t queued_data = 0;
  uint64_t queued_local_mrs = 0;
  uint64_t queued_remote_mrs = 0;
  /// Inbound frames rejected by the decoder or by validation.
  uint64_t protocol_errors = 0;
  /// Requests from the peer answered with an error status.
  uint64_t rejected_requests = 0;
  /// Bytes the peer has allocated on our side.
  uint64_t peer_alloc_bytes = 0;
  /// Bytes held by local_mrs from alloc_for_peer (peer-max-claim-bytes).
  uint64_t peer_claim_bytes = 0;
  /// Received data bytes not yet claimed.
  uint64_t queued_data_bytes = 0;
  /// SendData requests we acknowledged inside another's response
  /// (cumulative acknowledgements sent), and the peer's to us.
  uint64_t merged_acks_sent = 0;
  uint64_t merged_acks_received = 0;
  /// SendData requests we acknowledged on a SendData of our own
  /// (SendData.acked, EXT_PIGGYBACK_ACKS), and the peer's to us.
  uint64_t piggybacked_acks_sent = 0;
  uint64_t piggybacked_acks_received = 0;
  /// Keepalive Pings we sent (after keepalive-ms of silence from the peer).
  uint64_t keepalive_pings = 0;
  /// Immediate values (write_with_imm, send_data with a value) queued for
  /// receive_imm, and those dropped: over peer-max-queued-imms, or from a
  /// peer we did not offer immediate data.
  uint64_t queued_imms = 0;
  uint64_t imms_dropped = 0;
  /// Leases of regions we lent that ended without a release (revoked).
  uint64_t leases_expired = 0;
  /// Rendezvous: SendData chunks we sent by reference to our memory (the
  /// peer read them), chunks of the peer's we read with RDMA READ, and the
  /// bytes allocated for the peer's chunks not yet delivered.
  uint64_t rendezvous_sent = 0;
  uint64_t rendezvous_read = 0;
  uint64_t rendezvous_bytes = 0;
  /// Remote actors' flow control (EXT_ACTOR_FLOW): the peer's actor
  /// messages delivered to our actors' mailboxes and not yet taken from
  /// them, and the most there ever were (at most actor-window-messages).
  uint64_t actor_buffered = 0;
  uint64_t actor_buffered_max = 0;
  /// Our actor messages waiting for the peer's credit, and their bytes
  /// (at most actor-send-queue-bytes).
  uint64_t actor_queued = 0;
  uint64_t actor_queued_bytes = 0;
  /// Our counted actor messages the peer has not acknowledged yet.
  uint64_t actor_in_flight = 0;
  /// Our actor messages refused because the queue was full.
  uint64_t actor_send_refused = 0;
  /// ActorAcks we sent and the peer's we took.
  uint64_t actor_acks_sent = 0;
  uint64_t actor_acks_received = 0;
  /// Bytes held by the reassembly of the peer's chunked actor message
  /// (counted against peer-max-queued-bytes).
  uint64_t partial_actor_bytes = 0;
  /// The peer's partial work ended by the node: chunked actor messages
  /// dropped over peer-max-queued-bytes or past peer-partial-timeout-ms,
  /// rendezvous READs past the latter.
  uint64_t partials_dropped = 0;
  /// Packed frames (EXT_PACKED_FRAMES): messages we sent that carried
  /// several frames, and the frames they carried.
  uint64_t packed_messages_sent = 0;
  uint64_t packed_frames_sent = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, agent_stats& x) {
  return f(x.owned_mrs, x.pending_requests, x.queued_data, x.queued_local_mrs,
           x.queued_remote_mrs, x.protocol_errors, x.rejected_requests,
           x.peer_alloc_bytes, x.peer_claim_bytes, x.queued_data_bytes,
           x.merged_acks_sent, x.merged_acks_received, x.keepalive_pings,
           x.queued_imms, x.imms_dropped, x.leases_expired, x.rendezvous_sent,
           x.rendezvous_read, x.rendezvous_bytes, x.actor_buffered,
           x.actor_buffered_max, x.actor_queued, x.actor_queued_bytes,
           x.actor_in_flight, x.actor_send_refused, x.actor_acks_sent,
           x.actor_acks_received, x.piggybacked_acks_sent,
           x.piggybacked_acks_received, x.partial_actor_bytes,
           x.partials_dropped, x.packed_messages_sent, x.packed_frames_sent);
}

} // namespace rdmactor
