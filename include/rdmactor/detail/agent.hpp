#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "rdmactor/agent_stats.hpp"
#include "rdmactor/allocator.hpp"
#include "rdmactor/atoms.hpp"
#include "rdmactor/data_handler.hpp"
#include "rdmactor/detail/actor_directory.hpp"
#include "rdmactor/detail/transport_actor.hpp"
#include "rdmactor/memory_pool.hpp"
#include "rdmactor/options.hpp"
#include "rdmactor/remote_mr.hpp"

namespace rdmactor {

/// An actor that takes the data a peer sends as pushed messages instead of
/// calling `receive_data`: `(data_atom, local_mr)`, one per chunk, in
/// arrival order, sent by the connection's agent.
using data_subscriber = caf::typed_actor<caf::reacts_to<data_atom, local_mr>>;

/// An actor that takes what a peer sends, pushed, naming the connection it
/// came by (so that one actor can serve several connections) and with the
/// immediate values; subscribed with `(subscribe_data_atom,
/// chunk_subscriber)`.  `conn` is the connection's actor id: `conn->id()`
/// of the `connection_actor` handle the node gave you.  In arrival order:
/// - `(data_atom, conn, local_mr chunk)`: a send_data chunk;
/// - `(imm_atom, imm, conn, local_mr chunk)`: a chunk of a send_data with
///   the immediate value `imm` (every chunk of that call carries it);
/// - `(imm_atom, imm, conn, uint64_t bytes)`: the peer's write_with_imm of
///   `bytes` bytes landed in our memory before this message was sent.
using chunk_subscriber
    = caf::typed_actor<caf::reacts_to<data_atom, uint64_t, local_mr>,
                       caf::reacts_to<imm_atom, uint32_t, uint64_t, local_mr>,
                       caf::reacts_to<imm_atom, uint32_t, uint64_t, uint64_t>>;

/// The operations of the async-rdma agent protocol, as users see them;
/// `connection_actor` extends them and the agent implements both.
///
/// The agent actor (one per peer) speaks the protocol.  User operations
/// (each answered with a value or a `caf::error` within
/// request_timeout_ms):
/// - `(request_remote_mr_atom, size, align) -> remote_mr`: AllocMR.
/// - `(send_mr_atom, local_mr) -> mr_token`: SendMR LOCAL; the region stays
///   alive in our owned table until the peer releases it.
/// - `(send_mr_atom, remote_mr) -> mr_token`: SendMR REMOTE: hands the
///   peer's region back; the peer gets it through `receive_local_mr`.
/// - `(receive_local_mr_atom) -> local_mr`, `(receive_remote_mr_atom) ->
///   remote_mr`, `(receive_data_atom) -> local_mr`: the next one the peer
///   sent (waits up to request_timeout_ms).
/// - `(send_data_atom, local_mr) -> bytes`: SendData in chunks that fit the
///   negotiated max message length; answered when the peer acknowledged
///   every chunk.
/// - `(subscribe_data_atom, data_subscriber) -> chunks`: from now on every
///   chunk the peer sends goes to the subscriber as `(data_atom, local_mr)`
///   (no request per chunk; the CAF way to consume a stream of messages).
///   Chunks queued so far go first; the answer is their number.  While a
///   subscriber is set, `receive_data` fails with `invalid_argument`, and
///   waiting `receive_data` calls are failed so.  An invalid handle ends
///   the subscription, as does the subscriber's termination (the agent
///   monitors it); data queues for `receive_data` again.  Chunks pushed
///   before the agent learned of that termination are lost with the
///   subscriber, as any message to a dead actor.  The subscriber learns of
///   the connection's end by monitoring the connection.
/// - `(subscribe_data_atom, chunk_subscriber) -> items`: the same with
///   the connection named and immediate values pushed too (see
///   chunk_subscriber): queued chunks go first, then queued immediate
///   values; the answer is their number.  It replaces a data_subscriber
///   and the other way round; while it is set, `receive_data` and
///   `receive_imm` fail with `invalid_argument`.
/// - `(subscribe_data_atom, data_handler_ptr) -> chunks`: the same as a
///   data_subscriber, but the chunks go to `handler->on_data` inside the
///   agent's activation, after each poll of its completion queue (no
///   message per chunk; what the handler sends through its context
///   leaves in that activation, with the acknowledgements of what it
///   read).  Replaces a subscriber and the other way round; a null
///   pointer ends it (`on_detach` with an empty error), as does the
///   connection's end (`on_detach` with the end reason) and an exception
///   from `on_data` (`errc::handler_failed`; data queues again).  The
///   handler must not hold a strong handle to its own connection (a cycle
///   that keeps it open): it sends through its `data_context`.
/// - `(send_mr_atom, local_mr | remote_mr, uint64_t tag) -> mr_token`:
///   SendMR with an application tag (0: none) that the receiver gets with
///   the token; `not_negotiated` for a peer whose Hello did not offer tags.
/// - `(send_mr_atom, local_mr, uint64_t tag, uint32_t lease_ms) ->
///   mr_token`: SendMR LOCAL with a lease: the peer may use the region for
///   `lease_ms` (it stops a quarter earlier, at most 1 s, by its own
///   clock), unless it renews the lease; then we revoke it: the token
///   names a registration of its own, deregistered at the end, and the
///   region leaves our owned table (its memory returns once no handle of
///   ours is left) even if the peer never releases it.  The region must
///   come from alloc_local_mr (`invalid_argument` else);
///   `not_negotiated` for a peer whose Hello did not offer leases.  An
///   operation of the peer that still runs when the registration goes
///   fails and ends the connection, as any remote access error.
/// - `(renew_lease_atom, remote_mr, uint32_t lease_ms) -> granted_ms`:
///   asks the lender to extend the lease of a region it lent us with one,
///   by up to `lease_ms` from now (at most its original duration).
///   Operations on a region whose lease ended fail with `lease_expired`
///   (locally, before anything is posted), as do late renewals.
/// - `(receive_tagged_local_mr_atom) -> (local_mr, tag)`,
///   `(receive_tagged_remote_mr_atom) -> (remote_mr, tag)`: the next
///   region with its tag (0 for an untagged send_mr); they share the queue
///   of receive_local_mr / receive_remote_mr, which drop the tag.
/// - `(send_data_atom, local_mr, uint32_t imm) -> bytes`: SendData whose
///   every chunk carries `imm` (SendData.imm); `not_negotiated` for a peer
///   that did not offer immediate data.
/// - `(receive_imm_atom) -> (imm, bytes, local_mr)`: the next immediate
///   value without a chunk_subscriber: of a write_with_imm (`bytes`
///   written, empty local_mr) or of a send_data chunk (the chunk, `bytes`
///   its size).  Chunks that carry a value queue here, not for
///   receive_data; at most peer-max-queued-imms (further ones are refused
///   or dropped as protocol noise).
/// - `(release_atom, remote_mr) -> bytes`: ReleaseMR now.
/// - `(stats_atom) -> agent_stats`.
///
/// From the link it drives: `qp_down_atom` (sent to itself when the link
/// fails).  Internal:
/// `flush_acks_atom`: sends the SendData acknowledgements gathered
/// (cumulative acknowledgements, for a peer whose Hello offered them); the
/// agent's runner flushes without it (its tail, scheduling/direct_poll.hpp)
/// and sends it only when a message races the tail;
/// `(release_atom, mr_token)` from a dropped `remote_mr`; `timeout_atom`:
/// the periodic sweep that ends requests and receive calls past
/// request_timeout_ms (armed only while something waits);
/// `transport::tick_atom`: the keepalive timer
/// (actors/connection/agent_keepalive.cpp), kept by the process's keepalive
/// timer (which holds the agent weakly, so a pending timer never keeps a
/// dropped connection open), armed while keepalive runs (keepalive-ms not 0, a
/// peer that offers it). Per-peer limits (options peer_max_*) are enforced
/// here: over a limit the peer gets QUOTA_EXCEEDED; after peer_max_violations
/// refusals or malformed frames in a row, or more than peer_max_noise pieces of
/// protocol noise within peer_noise_window_ms, it is disconnected.  Lines
/// the peer triggers are rate-limited (peer_max_log_lines).
/// When the peer goes, every pending request fails with `peer_gone`,
/// everything held for the peer is released and the agent quits.  When the
/// peer closes the connection on purpose (its Goodbye), pending requests
/// fail with `closed` instead and the agent quits with `peer_closed`.
using peer_operations = caf::typed_actor<
    caf::replies_to<request_remote_mr_atom, uint64_t,
                    uint64_t>::with<remote_mr>,
    caf::replies_to<send_mr_atom, local_mr>::with<mr_token>,
    caf::replies_to<send_mr_atom, remote_mr>::with<mr_token>,
    caf::replies_to<receive_local_mr_atom>::with<local_mr>,
    caf::replies_to<receive_remote_mr_atom>::with<remote_mr>,
    caf::replies_to<send_data_atom, local_mr>::with<uint64_t>,
    caf::replies_to<receive_data_atom>::with<local_mr>,
    caf::replies_to<subscribe_data_atom, data_subscriber>::with<uint64_t>,
    caf::replies_to<subscribe_data_atom, data_handler_ptr>::with<uint64_t>,
    caf::replies_to<release_atom, remote_mr>::with<uint64_t>,
    caf::replies_to<stats_atom>::with<agent_stats>,
    caf::replies_to<send_mr_atom, local_mr, uint64_t>::with<mr_token>,
    caf::replies_to<send_mr_atom, remote_mr, uint64_t>::with<mr_token>,
    caf::replies_to<receive_tagged_local_mr_atom>::with<local_mr, uint64_t>,
    caf::replies_to<receive_tagged_remote_mr_atom>::with<remote_mr, uint64_t>,
    caf::replies_to<send_data_atom, local_mr, uint32_t>::with<uint64_t>,
    caf::replies_to<receive_imm_atom>::with<uint32_t, uint64_t, local_mr>,
    caf::replies_to<subscribe_data_atom, chunk_subscriber>::with<uint64_t>,
    caf::replies_to<send_mr_atom, local_mr, uint64_t, uint32_t>::with<mr_token>,
    caf::replies_to<renew_lease_atom, remote_mr, uint32_t>::with<uint32_t>>;

/// The connection actor: the typed interface users call, one per peer.
///
/// Every request is answered with a value or a `caf::error` (category
/// `rdmactor`) within request_timeout_ms; use `request(conn, timeout, ...)`
/// with a timeout of your own as well.
///
/// - `(alloc_local_mr_atom, size, align) -> local_mr`: registered local
///   memory with every access right (from the node's allocator).
/// - `(alloc_local_mr_atom, size, align, uint32_t access) -> local_mr`:
///   the same with the rights peers get (bits of transport::access;
///   local_write is always added): e.g. `access::remote_read` lends a
///   region read-only.  The fabric enforces them: a peer's WRITE into a
///   region without remote_write completes with `remote_access_error` on
///   the writer, and, as on any reliable connection, the connection then
///   ends on both sides.  Unknown bits: `invalid_argument`.
/// - `(alloc_for_peer_atom, size, align) -> local_mr`: the same, for memory
///   spent because the peer asked (to read what it lends: its claimed
///   length).  Counted against this connection's peer-max-claim-bytes until
///   the last handle goes, on any thread, also after the connection ended
///   (agent_stats::peer_claim_bytes); over it the answer is
///   `errc::quota_exceeded`.  Layout errors as for alloc_local_mr.
/// - `(request_remote_mr_atom, size, align) -> remote_mr`: the peer
///   allocates memory for us.
/// - `(send_mr_atom, local_mr | remote_mr) -> mr_token`,
///   `(receive_local_mr_atom) -> local_mr`,
///   `(receive_remote_mr_atom) -> remote_mr`: hand tokens over.
/// - `(send_data_atom, local_mr) -> bytes`, `(receive_data_atom) ->
///   local_mr`: two-sided messages, chunked by the max message length; the
///   receiver gets one `local_mr` per chunk.
/// - `(subscribe_data_atom, data_subscriber) -> chunks`: push every chunk
///   to an actor as `(data_atom, local_mr)` instead (see peer_operations).
/// - `(subscribe_data_atom, data_handler_ptr) -> chunks`: hand every chunk
///   to a handler called inside the agent's activation instead
///   (rdmactor/data_handler.hpp; see peer_operations).
/// - `(write_atom, local_mr, remote_mr) -> bytes`,
///   `(read_atom, local_mr, remote_mr) -> bytes`: one-sided RDMA; slices of
///   either side allowed, lengths must match.
/// - `(fetch_add_atom, remote_mr, add) -> old`,
///   `(compare_swap_atom, remote_mr, expected, desired) -> old`: one-sided
///   atomics on the word at the start of the remote_mr (its first 8 bytes;
///   it must have at least 8, and start 8-byte aligned: slice it to reach
///   another word).  fetch_add adds (wrapping); compare_swap stores
///   `desired` if the word equals `expected`; both answer the value the
///   word had before (success of a CAS: old == expected).  Atomic with
///   respect to every other atomic on that word through the peer's device
///   (all its connections), not to WRITEs or the peer's CPU.  Errors:
///   `misaligned`, `out_of_bounds` (under 8 bytes), `invalid_argument` (a
///   released or foreign remote_mr), `unsupported` (a device without
///   atomics: verbs atomic_cap IBV_ATOMIC_NONE), and `remote_access_error`
///   when the peer's region lacks remote-atomic access, which, as on
///   verbs, also ends the connection.  Regions from `alloc_local_mr` and
///   from the peer's AllocMR (`request_remote_mr`) carry remote-atomic
///   access where the device has atomics.
/// - `(write_with_imm_atom, local_mr, remote_mr, uint32_t imm) -> bytes`:
///   an RDMA WRITE with immediate data: the peer gets `imm` (through its
///   chunk_subscriber or receive_imm) after the data is in place, in order
///   with the messages around it.  It consumes one of the peer's receives,
///   so it waits for a send credit like a message.  At most one work
///   request (the device's max_wr_bytes: 8 MiB on rxe, 2 GiB on soft),
///   else `invalid_argument`; `not_negotiated` for a peer whose Hello did
///   not offer immediate data.
/// - `(send_data_atom, std::vector<std::byte> | std::vector<char> |
///   std::string) -> bytes`: send_data of bytes passed by value, in one
///   request: the agent copies them into pool memory (local access only,
///   never lent to a peer) and sends that memory as `(send_data_atom,
///   local_mr)` does; the copy returns to the pool when the peer
///   acknowledged it.  `std::vector<char>` is CAF 0.17's byte buffer
///   (CAF 0.18 names it caf::byte_buffer).  Errors: those of send_data,
///   and `size_limit`/`out_of_memory` when the pool cannot hold the copy
///   (max-alloc-bytes).  `(send_data_atom, std::vector<std::byte>,
///   uint32_t imm)`: the same with an immediate value.
/// - `(release_atom, remote_mr) -> bytes`: release peer memory now.
/// - `(peer_atom) -> link_params`: the peer and the negotiated parameters.
/// - `(stats_atom) -> agent_stats`.
/// - Remote actors (actors/remote/remote_actors.hpp; docs/remote-actors.md):
///   `(publish_atom, name, caf::actor) -> replaced`: makes a local actor
///   reachable by the peer of this connection under `name` (names of 1 to
///   256 bytes; the node's `publish` serves every connection); `replaced`
///   says whether another was published under the name.  Held strongly
///   until unpublished or the connection ends.
///   `(unpublish_atom, name) -> bool`: whether something was published;
///   proxies the peer already holds keep working while the actor lives.
///   `(lookup_atom, name) -> caf::actor`: a local proxy of the actor the
///   peer published under `name` (`unknown_actor` if none,
///   `not_negotiated` for a peer that does not offer remote actors): send,
///   request, delegate and monitor it as a local actor.  Message types
///   must be registered in both actor systems' configs; an unregistered
///   type fails the request with `serialization_failed`.
///   `(lookup_atom, name, interface) -> caf::actor`: the same, checked
///   against the published actor's interface (`interface` from
///   `rdmactor::interface_of<Handle>(sys)`); a mismatch fails with
///   `invalid_argument`; then `caf::actor_cast<Handle>` the answer.
///   The proxies quit with `exit_reason::remote_link_unreachable` when
///   the connection ends (`rdmactor::cause_of` gives its end: `peer_gone`
///   when the peer dies) and pending requests through them fail with that
///   cause.
///
/// One actor per peer plays this interface: the agent
/// (actors/connection/agent.cpp), which posts on and polls the link its
/// transport actor lends it inside its own activation, so a user's call reaches
/// the queue pair in one mailbox hop and its answer comes back in one.
///
/// Lifetime: the connection (the agent) supervises the transport of its
/// peer and ends when the last handle to it goes.  Users `monitor` it to
/// learn of its end; the down message carries the cause:
/// - `errc::peer_closed`: the peer closed the connection on purpose
///   (graceful close, below); logged at info level.
/// - `errc::peer_gone`: the peer died, its process was killed, the queue
///   pair broke, or it stayed silent past the keepalive bound
///   (rdmactor.keepalive-ms: an idle peer node is pinged after
///   keepalive-ms of silence on all our connections to it, and every
///   connection to it is dropped if it stays silent another keepalive-ms).
/// - `errc::closed` (or the exit reason): closed on this side.
///
/// To close it, `send_exit(conn, caf::exit_reason::user_shutdown)` (or
/// close the node, or drop the last handle).  Pending requests on this side
/// fail with `errc::closed` at once.  If the peer's Hello offered Goodbye,
/// the agent then posts a Goodbye behind every frame it posted before
/// (so the peer receives data already posted, in order) and the transport
/// keeps the queue pair open until the peer closed its side, at most
/// rdmactor.close-timeout-ms; the peer's pending requests fail with
/// `errc::closed` and its connection ends with `errc::peer_closed`.
/// Chunks of a send_data that failed with `closed` here may still reach
/// the peer (they were posted already); wait for send_data's answer before
/// closing when the peer must have everything.  With a peer that does not
/// offer Goodbye the queue pair is closed at once and the peer sees
/// `peer_gone`, as before.
using connection_actor = peer_operations::extend<
    caf::replies_to<alloc_local_mr_atom, uint64_t, uint64_t>::with<local_mr>,
    caf::replies_to<alloc_for_peer_atom, uint64_t, uint64_t>::with<local_mr>,
    caf::replies_to<write_atom, local_mr, remote_mr>::with<uint64_t>,
    caf::replies_to<read_atom, local_mr, remote_mr>::with<uint64_t>,
    caf::replies_to<fetch_add_atom, remote_mr, uint64_t>::with<uint64_t>,
    caf::replies_to<compare_swap_atom, remote_mr, uint64_t,
                    uint64_t>::with<uint64_t>,
    caf::replies_to<peer_atom>::with<transport::link_params>,
    caf::replies_to<alloc_local_mr_atom, uint64_t, uint64_t,
                    uint32_t>::with<local_mr>,
    caf::replies_to<write_with_imm_atom, local_mr, remote_mr,
                    uint32_t>::with<uint64_t>,
    caf::replies_to<send_data_atom, std::vector<std::byte>>::with<uint64_t>,
    caf::replies_to<send_data_atom, std::vector<char>>::with<uint64_t>,
    caf::replies_to<send_data_atom, std::string>::with<uint64_t>,
    caf::replies_to<send_data_atom, std::vector<std::byte>,
                    uint32_t>::with<uint64_t>,
    caf::replies_to<publish_atom, std::string, caf::actor>::with<bool>,
    caf::replies_to<unpublish_atom, std::string>::with<bool>,
    caf::replies_to<lookup_atom, std::string>::with<caf::actor>,
    caf::replies_to<lookup_atom, std::string,
                    std::vector<std::string>>::with<caf::actor>>;

/// The agent's full interface: the connection's plus what the transport,
/// the fabric (`cq_event_atom`, `repost_atom`: wake-ups of the link it
/// drives) and the agent itself send it.
using agent_actor = connection_actor::extend<
    caf::reacts_to<release_atom, mr_token>, caf::reacts_to<timeout_atom>,
    caf::reacts_to<flush_acks_atom>, caf::reacts_to<transport::tick_atom>,
    caf::reacts_to<transport::qp_down_atom, caf::error>,
    caf::reacts_to<actor_out_atom>, caf::reacts_to<actor_ack_atom>,
    caf::reacts_to<transport::poll_atom>,
    caf::reacts_to<transport::cq_event_atom>,
    caf::reacts_to<transport::repost_atom, uint32_t>>;

/// Spawns the agent of one peer, which drives the link the transport lent
/// it (`spawn_lending_transport`): it posts and polls the CQ from its own
/// activations, and gives the link back to the transport (which it links
/// to and monitors; the transport then closes it) when it shuts down.  `link`
/// holds the negotiated parameters of the connection; `allocator` serves
/// `alloc_local_mr`.  The agent ends when the last handle to it goes, the link
/// fails, or it is sent an exit. `node_actors`: the actors the node published
/// (every connection serves them; null: none).  `node`: the node's identity
/// for its Hello (0: none; see `spawn_connection`).
agent_actor spawn_agent(caf::actor_system& sys, transport::lent_link transport,
                        transport::link_params link, memory_pool_ptr pool,
                        allocator_actor allocator, const options& opts,
                        actor_directory_ptr node_actors = nullptr,
                        uint64_t node = 0);

/// Returns the interface of the typed actor handle `Handle` as the peer's
/// lookup checks it: `(lookup_atom, name, interface_of<Handle>(sys))`.
template <class Handle>
std::vector<std::string> interface_of(caf::actor_system& sys) {
  auto set = sys.message_types<Handle>();
  return {set.begin(), set.end()};
}

} // namespace rdmactor
