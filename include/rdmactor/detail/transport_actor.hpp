#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>
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

/// What a transport delivers to its one subscriber (a raw user: the bench,
/// tests).
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

/// What the agent hands back with its link at its end (`lease_end_atom`):
/// how the transport closes the connection, and what must live until the
/// queue pair is closed.
struct link_return {
  /// Why the connection ends: the link fails with it when there is no
  /// graceful close.
  caf::error reason;
  /// Our Goodbye frame (empty: no graceful close).  Posted behind every
  /// operation posted before; the transport then keeps the queue pair
  /// open until the peer closes its side (the link goes down, logged at
  /// debug level), the peer's own Goodbye arrives (`is_goodbye`: both
  /// sides closed at once) or `close_timeout_ms` passed, and quits with
  /// `closed`.  Frames from the peer are dropped meanwhile.
  std::vector<uint8_t> goodbye;
  uint32_t close_timeout_ms = 0;
  /// Tells the peer's Goodbye from its other frames (the transport does
  /// not read the agent's frames).
  std::function<bool(const local_mr&)> is_goodbye;
  /// Memory the peer may still reach through tokens it holds (the regions
  /// lent to it): released once the queue pair is closed, when the
  /// transport's state goes (before its exit and down messages leave).
  std::shared_ptr<void> keep_until_closed;
  /// Trim the heap after that (common/heap_trim.hpp): the connection's
  /// buffers are gone then, and the memory they freed would otherwise
  /// stay resident.
  bool trim_heap = false;
};

/// The transport actor: owns one connection's queue pair and CQ.
///
/// Requests (each answered when the work completion arrives, or with a
/// `caf::error` carrying the completion status as `errc`):
/// - `(send_atom, header, payload) -> bytes`: one SEND of `header` (copied
///   into a registered slot, at most `max_send_header_bytes`) followed by
///   `payload` (zero copy; may be an empty handle).  Sends wait for a send
///   credit (a posted receive on the peer), so the peer never sees RNR.
/// - `(post_atom, header, payload)`: the same SEND without an answer, for
///   senders that learn the outcome otherwise (from the peer's response,
///   or from `qp_down` when the connection fails).  A post the
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
/// - `(lease_end_atom, link_return)`: the agent gives back the link the
///   transport lent it (`spawn_lending_transport`); see `link_return`.
/// Operations execute in the order they were requested.
///
/// Completions: the actor drains its CQ whenever a completion event
/// arrives and, depending on `polling` (see completion_mode.hpp), keeps
/// polling at the end of its activations (without messages: the runner of
/// scheduling/link_runner.hpp) instead of arming the CQ.  A
/// polling actor gives its CAF worker back after `scheduler.max-throughput`
/// messages, so polling needs that bounded (`rdmactor::config` sets it);
/// with an unbounded one the actor falls back to `event` and says so once.
///
/// Internal: `cq_event_atom` (completions are ready, where the runner
/// cannot take the fabric's notification without a message: an unbounded
/// max-throughput, or a poll racing a message), `poll_atom` (the actor's
/// own next poll, likewise), `close_timeout_atom` (the end of a
/// graceful close's wait, or the peer's own Goodbye), `repost_atom`
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
    caf::reacts_to<cq_event_atom>, caf::reacts_to<poll_atom>,
    caf::reacts_to<repost_atom, uint32_t>,
    caf::reacts_to<lease_end_atom, link_return>,
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

struct driven_link;

/// A connection's link, lent by the transport actor that owns it to the
/// agent that drives it (`spawn_lending_transport`).
struct lent_link {
  transport_actor transport;
  /// The link, in the transport's state; null when it could not be opened
  /// (the transport has quit with the cause then).  Valid until the agent
  /// gives it back: a lending transport does not end before.
  driven_link* link = nullptr;
  /// How the agent awaits completions.
  polling how;
};

/// Opens the data path of `qp` as `spawn_transport` does (receives posted
/// on the calling thread) and lends it to the caller's agent, which posts
/// and polls it from its own activations: no mailbox hop on the data path.
/// The transport owns the link from the open to the close, and touches it
/// only once it is given back (`lease_end_atom`, sent by the agent after
/// its last use, also from its destructor); exits meanwhile are ignored
/// (the agent's, which may overtake its `lease_end`, and anyone else's:
/// the agent decides when the connection ends).  Then it drives the link
/// itself: graceful close or failure, draining, and the release of what it
/// was given to keep.  The requests of the raw interface fail with `closed`
/// while the link is lent.  It quits at once when the link cannot be
/// opened, with the cause.
lent_link spawn_lending_transport(caf::actor_system& sys, device_ptr dev,
                                  queue_pair_ptr qp, polling how = polling{});

} // namespace rdmactor::transport

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rdmactor::transport::link_return)
