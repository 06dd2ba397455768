#pragma once

#include <cstddef>
#include <cstdint>

/// Fixed limits of the soft fabric.  They bound every queue and buffer a
/// queue pair keeps, so that neither the owner nor the peer can make it
/// allocate without bound.
namespace rdmactor::transport::soft::limits {

/// Sends, writes and reads a queue pair keeps outstanding (posted, not yet
/// answered by the peer) at most; `post_*` beyond it fail with
/// `quota_exceeded` (verbs: ENOMEM on a full send queue).  A peer that
/// makes us owe more responses than this breaks the protocol.
constexpr size_t max_send_wr = 65536;

/// Receives a queue pair keeps posted at most; `post_recv` beyond it fails
/// with `quota_exceeded`.
constexpr size_t max_recv_wr = 65536;
/// Receives a shared receive queue holds at most.
constexpr uint32_t max_srq_wr = 1u << 20;

/// Completions a CQ holds at most; more (the owner posts without polling)
/// is a CQ overrun, which moves the queue pair to the error state.
constexpr size_t max_cq_entries = 2 * (max_send_wr + max_recv_wr);

/// Largest RDMA WRITE or READ (the 2^31 bytes of InfiniBand).
constexpr uint64_t max_rdma_bytes = uint64_t{1} << 31;

/// Largest `max_message_len_bytes` a side may offer.
constexpr uint32_t max_message_len_bytes = uint32_t{1} << 30;

/// Largest `recv_depth` a side may offer.
constexpr uint32_t max_recv_depth = 65536;

/// Inbound payload bytes a queue pair buffers while its owner has no
/// receive posted (receiver not ready).  A request that does not fit stops
/// reading until the queue drains or the RNR timer fires.
constexpr size_t pending_budget_bytes = size_t{4} << 20;

/// Inbound requests buffered at most while the receiver is not ready.
constexpr size_t max_pending_requests = 4096;

/// Frames one `sendmsg` gathers at most (the outbound stream writes every
/// queued frame in one call, up to this many and `gather_bytes`), and the
/// registrations their payloads may name.
constexpr size_t gather_frames = 64;

/// Bytes one `sendmsg` gathers at most; a frame that starts below the
/// bound goes whole.
constexpr uint64_t gather_bytes = 1024 * 1024;

/// Size of the buffer a queue pair reads the socket through.
constexpr size_t rx_buffer_bytes = 64 * 1024;

/// Payload remainders at least this large are received straight into the
/// destination memory instead of through the read buffer.
constexpr size_t direct_recv_bytes = 16 * 1024;

/// Handshakes a listener runs at the same time.  A new connection beyond
/// it drops one of the address with the most handshakes in progress (its
/// oldest silent one first): a flood from some addresses cannot evict the
/// clients of others.
constexpr size_t max_pending_handshakes = 64;

/// Handshakes one source address may have in progress; its next connection
/// drops its own oldest (silent first).
constexpr size_t max_pending_handshakes_per_address = 16;

static_assert(max_pending_handshakes_per_address < max_pending_handshakes);

/// Smallest `max_message_len_bytes` a side may offer (a frame must hold an
/// agent header).
constexpr uint32_t min_message_len_bytes = 256;

/// After sending a final NAK, how long a queue pair waits for the peer to
/// read it and close, in milliseconds.
constexpr int linger_ms = 1000;

/// How long a responder may hold the ACK of a SEND back, hoping that a
/// frame it sends anyway carries it (the reply of a request/response
/// protocol does), in microseconds.  The peer's SEND completes this much
/// later at worst; RDMA WRITE and READ are answered at once.
constexpr uint32_t ack_delay_us = 200;

/// ACKs of SENDs a responder holds back at most: a quarter of the receive
/// depth (the peer cannot have more SENDs outstanding), 1..`max_owed_acks`.
constexpr uint32_t max_owed_acks = 16;

static_assert(max_owed_acks <= 255, "owed ACKs ride in a frame's u8 field");

/// How long a polling owner may make no progress (`queue_pair::progress`)
/// before the event loop reads its socket again, in milliseconds: a
/// worker held elsewhere must not stop the acknowledgements a NIC would
/// send on its own.
constexpr uint32_t owner_stall_ms = 10;

/// Upper bound of a timeout taken from the peer's hello, in milliseconds.
constexpr uint32_t max_peer_timeout_ms = 10 * 60 * 1000;

} // namespace rdmactor::transport::soft::limits
