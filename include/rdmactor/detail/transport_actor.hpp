#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "rdmactor/detail/completion_mode.hpp"
#include "rdmactor/detail/transport_atoms.hpp"
#include "rdmactor/local_mr.hpp"
#include "rdmactor/mr_token.hpp"
#include "rdmactor/transport/fabric.hpp"
#include "rdmactor/transport/link_params.hpp"

namespace rdmactor::transport {

/// What a transport delivers to its one subscriber (the agent).
///
/// - `(recv_atom, local_mr)`: one inbound message; the handle views the
///   receive buffer, which is reposted when the last handle goes.
/// - `(imm_arrived_atom, imm, bytes)`: the peer's RDMA WRITE with immediate
///   data `imm` of `bytes` bytes landed; in order with the messages around
///   it (its receive buffer was reposted already).
/// - `(qp_down_atom, error)`: the connection failed or closed; sent once,
///   after every pending request was answered with an error.
using transport_subscriber
    = caf::typed_actor<caf::reacts_to<recv_atom, local_mr>,
                       caf::reacts_to<imm_arrived_atom, uint32_t, uint32_t>,
                       caf::reacts_to<qp_down_atom, caf::error>>;

/// The transport actor: owns one connection's queue pair and CQ.
///
/// Requests (each answered when the work completion arrives, or with a
/// `caf::error` carrying the completion status as `errc`):
/// - `(send_atom, header, payload) -> bytes`: one SEND of `header` (copied
///   into a registered slot, at most `max_send_header_bytes`) followed by
///   `payload` (zero copy; may be an empty handle).  Sends wait for a send
///   credit (a posted receive on the peer), so the peer never sees RNR.
/// - `(post_atom, header, payload)`: the same SEND without an answer, for
///   senders that learn the outcome otherwise (the agent: from the peer's
///   response, or from `qp_down` when the connection fails).  A post the
///   transport must refuse (too large, too many queued) is a bug of the
///   sender; it fails the connection with the reason rather than vanish.
/// - `(write_atom, src, dst) -> bytes`: RDMA WRITE of `src` to `dst`.
/// - `(read_atom, dst, src) -> bytes`: RDMA READ of `src` into `dst`.
/// - `(fetch_add_atom, word, add) -> old`, `(compare_swap_atom, word,
///   expected, desired) -> old`: an atomic on the 8-byte word `word` names
///   (len 8, 8-byte aligned); the answer is the word's value before it.
///   Refused with `unsupported` on a device without atomics, `misaligned`
///   / `out_of_bounds` for a bad word (see `link::submit_atomic`).
/// - `(write_imm_atom, src, dst, imm) -> bytes`: RDMA WRITE with immediate
///   data: consumes one of the peer's receives, so it waits for a send
///   credit like a send; at most one work request (the device's
///   max_wr_bytes).  Only for a peer that takes them (the agent checks
///   its Hello): an older rdmactor would read `imm` as returned credits.
/// - `(subscribe_atom, subscriber) -> link_params`: sets the subscriber and
///   flushes messages that arrived before.  The transport holds it (a
///   strong handle): it lives at least as long as the transport.
/// - `(subscribe_weak_atom, subscriber) -> link_params`: the same, holding
///   the subscriber weakly, for a subscriber that holds the transport
///   itself (the agent): its lifetime stays its users' business.  Messages
///   for a subscriber that is gone are dropped.
/// - `(close_atom, header, timeout_ms, marker)`: graceful close (the
///   agent's, for a peer that offered Goodbye): posts `header` (the
///   Goodbye frame) behind every operation posted before it, then keeps
///   the queue pair open until the peer closes its side (the link goes
///   down, logged at debug level), the peer's own Goodbye arrives (a frame
///   whose byte after the 4-byte frame length is `marker`: both sides
///   closed at once), or `timeout_ms` passed, and quits with `closed`.  From
///   then on exits (the agent's, which follows it) are ignored, frames
///   from the peer are dropped and a failure is no warning.  The message
///   must come with a strong reference that keeps the transport alive
///   until it is handled (the agent's own handle, or the transport as the
///   sender when the agent is being destroyed); the pending timeout keeps
///   it alive after that.  Requests made after it fail like those of a
///   closed connection.
/// Operations execute in the order they were requested.
///
/// Completions: the actor drains its CQ whenever a completion event
/// arrives and, depending on `polling` (see completion_mode.hpp), keeps
/// polling by sending itself `poll_atom` instead of arming the CQ.  A
/// polling actor gives its CAF worker back after `scheduler.max-throughput`
/// messages, so polling needs that bounded (`rdmactor::config` sets it);
/// with an unbounded one the actor falls back to `event` and says so once.
///
/// Internal: `cq_event_atom` (completions are ready: from the fabric's own
/// thread where it can notify, else from a poller thread), `poll_atom`
/// (the actor's own next poll), `close_timeout_atom` (the end of a
/// graceful close's wait), `repost_atom`
/// (receive buffers were released while the actor waited for that; the
/// argument is informational).  On failure or exit every pending request is
/// answered with an error; the actor then quits with the cause.
using transport_actor = caf::typed_actor<
    caf::replies_to<send_atom, std::vector<uint8_t>, local_mr>::with<uint64_t>,
    caf::reacts_to<post_atom, std::vector<uint8_t>, local_mr>,
    caf::replies_to<write_atom, local_mr, mr_token>::with<uint64_t>,
    caf::replies_to<read_atom, local_mr, mr_token>::with<uint64_t>,
    caf::replies_to<fetch_add_atom, mr_token, uint64_t>::with<uint64_t>,
    caf::replies_to<compare_swap_atom, mr_token, uint64_t,
                    uint64_t>::with<uint64_t>,
    caf::replies_to<write_imm_atom, local_mr, mr_token,
                    uint32_t>::with<uint64_t>,
    caf::replies_to<subscribe_atom, transport_subscriber>::with<link_params>,
    caf::replies_to<subscribe_weak_atom,
                    transport_subscriber>::with<link_params>,
    caf::reacts_to<cq_event_atom>, caf::reacts_to<poll_atom>,
    caf::reacts_to<repost_atom, uint32_t>,
    caf::reacts_to<close_atom, std::vector<uint8_t>, uint32_t, uint8_t>,
    caf::reacts_to<close_timeout_atom>>;

/// Spawns a transport actor owning `qp`.  The actor takes ownership of the
/// QP.  Before this returns, on the calling thread, it registers and posts
/// `qp->params().recv_depth` receive buffers of `max_message_len_bytes`
/// each, so the peer's first messages do not depend on when a scheduler
/// thread first runs the actor.  Fails (the actor quits at once) when the
/// receive pool cannot be registered or posted, or the negotiated receive
/// depth is below `min_recv_depth`.  `how` chooses how completions are
/// awaited.
transport_actor spawn_transport(caf::actor_system& sys, device_ptr dev,
                                queue_pair_ptr qp, polling how = polling{});

class link_handoff;

/// A connection's data path for an agent to drive, and the transport actor
/// that takes it over when the agent is done (`spawn_parked_transport`).
struct parked_link {
  transport_actor transport;
  /// Holds the opened link until the agent takes it; the agent leaves it
  /// here again when it shuts down.  Nothing in it when opening failed.
  std::shared_ptr<link_handoff> handoff;
  /// How the agent awaits completions (`spawn_parked_transport`'s `how`).
  polling how;
};

/// Opens the data path of `qp` as `spawn_transport` does (receives posted
/// on the calling thread), but leaves the link in `handoff` for an agent
/// to drive (the agent polls its CQ and posts from its own activations).
/// The transport actor waits parked: it answers
/// `subscribe_weak` with the link's parameters, and takes the link from
/// `handoff` when the agent leaves it there and then sends it anything that
/// needs the link (`close_atom`, `post_atom`, a request, an exit).  It
/// quits at once when the link cannot be opened, with the cause.  `how` is
/// for the link's last owner; the agent drives it with its own.
parked_link spawn_parked_transport(caf::actor_system& sys, device_ptr dev,
                                   queue_pair_ptr qp, polling how = polling{});

} // namespace rdmactor::transport
