#pragma once

// Internal to the agent: the remote actors of one connection.  Not
// installed; users see them through the connection's publish / lookup
// (include/rdmactor/detail/agent.hpp) and the node's publish
// (include/rdmactor/node.hpp).  Split by direction: the proxies, the
// handle resolver and the tables in remote_actors.cpp; messages to the
// peer in remote_actors_forward.cpp; messages from it in
// remote_actors_deliver.cpp.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_proxy.hpp>
#include <caf/actor_system.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/node_id.hpp>

#include "actors/remote/actor_flow.hpp"
#include "actors/remote/actor_outbox.hpp"
#include "actors/remote/message_signatures.hpp"
#include "common/mapped_buffer.hpp"
#include "common/ring_deque.hpp"
#include "protocol/agent.pb.h"
#include "rdmactor/detail/actor_directory.hpp"
#include "rdmactor/local_mr.hpp"
#include "rdmactor/memory_pool.hpp"
#include "rdmactor/options.hpp"

namespace rdmactor {

class remote_actors;

/// The local stand-in of an actor on the peer: what `lookup` answers, and
/// the sender of every message that actor sends us.  Each message it gets
/// (with its sender and request id) is serialized on the sending thread
/// and handed to the connection's agent, which posts it; responses come
/// back to the requester directly.  It quits (monitors and links see it)
/// with `exit_reason::remote_link_unreachable` when the connection ends
/// (its context holds the end: `peer_gone`, `peer_closed`, `closed`; see
/// `cause_of`), or with the reason the remote actor ended with.  A request it
/// cannot forward (closed connection, unregistered type, too large, too many
/// pending) is answered with the error at once; an asynchronous message it
/// cannot forward is dropped and logged.
class remote_actor_proxy final : public caf::actor_proxy {
public:
  remote_actor_proxy(caf::actor_config& cfg,
                     std::shared_ptr<remote_actors> router, uint64_t remote_id);

  ~remote_actor_proxy() override;

  /// Called by CAF for every message to this actor (any thread).
  void enqueue(caf::mailbox_element_ptr what,
               caf::execution_unit* ctx) override;

  /// Ends the proxy with `reason` (the router, at the connection's end or
  /// when the remote actor ended).
  void kill_proxy(caf::execution_unit* ctx, caf::error reason) override;

  void on_destroy() override;

  const char* name() const override {
    return "remote_actor_proxy";
  }

  /// The actor's id on the peer.
  uint64_t remote_id() const noexcept {
    return remote_id_;
  }

private:
  /// Weak: the router holds its proxies until they end.
  std::weak_ptr<remote_actors> router_;
  uint64_t remote_id_;
};

/// The remote actors of one connection (thread-safe): the actors the peer
/// may reach (published ones it looked up, actors that sent it messages, so
/// that it can answer, and actors whose handles we sent it), our proxies of
/// its actors, and the requests through those proxies that wait for an
/// answer.  The agent owns it; proxies share it.
///
/// Actor handles inside messages travel as CAF writes them: the actor's id
/// and node id on the sending node.  A handle we send names an actor of
/// our system (a local actor or one of our proxies) and makes it reachable
/// by the peer under its id, as a sender is; the peer resolves it into its
/// proxy of that id.  A handle the peer sends must name the peer's node
/// (the first node id it names is taken as its own; others are refused)
/// and becomes our proxy of that id, which lives until the peer says its
/// actor ended or the connection goes.  A handle of another node reaches
/// that node through the peer (its proxy forwards), so no handle ever
/// resolves to an actor of ours by an id the peer chose: a message that
/// names this node is refused whole.
class remote_actors : public std::enable_shared_from_this<remote_actors> {
public:
  remote_actors(caf::actor_system& sys, const options& opts, std::string peer,
                actor_directory_ptr node_directory);

  ~remote_actors();

  /// Sets the agent that posts our frames (held weakly).  Called once by
  /// the agent when it starts.  With `pool`, a serialization of at least
  /// `region_from_bytes` bytes is copied into the pool's registered
  /// memory on the sender's thread and travels to the agent that way (it
  /// goes to the peer from there: by rendezvous, or in chunks, without
  /// another copy).
  void set_agent(caf::strong_actor_ptr agent, memory_pool_ptr pool = nullptr,
                 size_t region_from_bytes = SIZE_MAX);

  /// The actors published on this connection only (the node's directory
  /// serves every connection).
  actor_directory& published() noexcept {
    return own_;
  }

  caf::actor_system& system() noexcept {
    return sys_;
  }

  /// What the peer's lookup finds.
  struct found {
    uint64_t id = 0; ///< 0: nothing published under the name
    std::vector<std::string> interface;
  };

  /// The peer's lookup of `name` (the agent, for an ActorLookup): the
  /// connection's directory first, then the node's.  The actor becomes
  /// reachable by the peer under its id.
  found find(const std::string& name);

  /// Returns our proxy of the peer's actor `id` (one per id while it
  /// lives); an invalid handle after `close` or while
  /// tuning::max_peer_proxies live.  Called by the agent.
  caf::actor proxy_for(uint64_t id);

  /// Takes one ActorMessage frame from the peer (the agent's thread):
  /// reassembles chunks, deserializes and delivers.  Returns an error when
  /// the frame violates the protocol (unknown target, a response nobody
  /// waits for, bad chunks, bytes that do not deserialize); the agent
  /// counts it as a violation.  Requests that cannot be delivered are
  /// answered with an error either way.
  /// `ctx` is the agent's execution unit (`self->context()`): the target
  /// is scheduled on the agent's worker, like a message an actor sends.
  caf::error on_frame(const protocol::ActorMessage& m, const uint8_t* data,
                      size_t len, caf::execution_unit* ctx);

  /// The bytes the reassembly of the peer's chunked actor message holds
  /// (its buffer's capacity, at most the message's announced size), or
  /// nullopt when none is being reassembled (one being discarded holds
  /// nothing).  The agent's thread.
  std::optional<uint64_t> partial_bytes() const noexcept;

  /// Drops the peer's chunked actor message being reassembled because of
  /// `why` (the agent's budget or deadline): frees its bytes, answers a
  /// request among it with `why`, and counts and drops its remaining
  /// chunks as they come (its credit returns with the last).  Returns
  /// whether one was being reassembled.  The agent's thread.
  bool drop_partial(const caf::error& why, caf::execution_unit* ctx);

  /// Refuses the peer's whole actor message `m` (a rendezvous one the
  /// agent could not take, `m.len()` bytes) because of `why`: counted for
  /// the peer's credit and returned at once, and a request among it is
  /// answered with `why` (the agent's thread).
  void refuse_frame(const protocol::ActorMessage& m, const caf::error& why,
                    caf::execution_unit* ctx);

  /// Ends everything (the agent's shutdown): pending requests through our
  /// proxies fail with `err`, the proxies quit with `reason`, nothing is
  /// reachable any more and the connection's directory is cleared.
  /// Idempotent.
  void close(const caf::error& reason, const caf::error& err);

  /// Forwards what a proxy got (called by the proxy on the sender's thread).
  void forward(remote_actor_proxy& from, caf::mailbox_element_ptr what,
               caf::execution_unit* ctx);

  /// Answers the request `what` (if it is one) with `err`; logs otherwise.
  void refuse(const caf::mailbox_element& what, const caf::error& err,
              caf::execution_unit* ctx);

  /// Messages forwarded to the peer and delivered from it.
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> delivered{0};

  // -- flow control (EXT_ACTOR_FLOW, actors/remote/actor_flow.hpp) ------------

  /// The peer's Hello arrived (the agent, through its sink): with `flow`,
  /// our messages keep to its window (`window_messages`, `window_bytes`)
  /// and we return credit for its messages; without, its messages are
  /// only limited by our window (a peer over it is disconnected).
  void start_flow(bool flow, uint64_t window_messages, uint64_t window_bytes);

  /// Takes the peer's ActorAck (the agent's thread) and hands queued
  /// messages the credit now allows to the agent, in order.  An error
  /// (a violation) when it acks more than was sent or less than before.
  caf::error take_ack(uint64_t messages, uint64_t bytes);

  /// Moves the messages proxies handed to the agent since the last call
  /// into `into` (the agent's, cleared first), oldest first.  The agent
  /// posts them when woken by an `actor_out_atom` (one per batch).
  void take_outbox(actor_outbox& into);

  /// The agent could not post a message a proxy forwarded (`err`): its
  /// credit returns (queued messages may go) and a request fails with
  /// `err` at once.  The agent's thread.
  void not_posted(uint64_t sender, uint64_t mid, size_t size, bool down,
                  const caf::error& err);

  /// The receiving half: the agent asks it for the credit to return.
  actor_inflow& inflow() noexcept {
    return *inflow_;
  }

  /// Counts of the flow control, for agent_stats.
  struct flow_counts {
    uint64_t buffered = 0;
    uint64_t buffered_max = 0;
    uint64_t queued = 0;
    uint64_t queued_bytes = 0;
    uint64_t in_flight = 0;
    uint64_t send_refused = 0;
    uint64_t acks_sent = 0;
    uint64_t acks_received = 0;
  };
  flow_counts flow_stats() const;

  /// Requests through our proxies waiting for an answer (tests, stats).
  size_t pending_requests() const;

  /// A published actor the peer looked up ended with `reason`: tells the
  /// peer (its proxies quit with the reason).  Called by the actor's
  /// attachable, on the thread where it ended.
  void exported_down(uint64_t id, const caf::error& reason);

private:
  struct pending_request {
    caf::weak_actor_ptr sender;
    caf::message_id mid;
    /// Holds a requester that is a proxy of another node's actor (nothing
    /// else may): the answer goes back through it.
    caf::strong_actor_ptr keep;
  };

  struct pending_key {
    uint64_t sender;
    uint64_t request;
    bool operator==(const pending_key& other) const noexcept {
      return sender == other.sender && request == other.request;
    }
  };

  struct pending_hash {
    size_t operator()(const pending_key& k) const noexcept {
      return std::hash<uint64_t>{}(k.sender * 31 + k.request);
    }
  };

  using pending_map
      = std::unordered_map<pending_key, pending_request, pending_hash>;

  /// One message whose chunks are arriving.
  struct partial {
    bool active = false;
    /// Refused (over actor-max-message-bytes, or dropped by the agent's
    /// budget or deadline): its chunks are counted and dropped.
    bool discard = false;
    uint64_t received = 0;
    protocol::ActorMessage head;
    uint64_t total = 0;
    mapped_buffer bytes;
  };

  /// The frame header fields of one of our messages.
  struct frame_head {
    uint64_t target;
    uint64_t sender;
    uint64_t mid;
    bool down;
    /// Counts against the window (not a response, not a down notice).
    bool counted;
  };

  /// A message waiting for the peer's credit (or behind one that does).
  struct queued_frame {
    frame_head head;
    std::vector<char> bytes;
    /// A large serialization: in registered memory instead of `bytes`.
    local_mr region = {};

    size_t size() const noexcept {
      return region.valid() ? region.size() : bytes.size();
    }
  };

  /// Hands a whole message to its target.  `ctx`: the agent's execution
  /// unit, so that the target runs next on the agent's worker instead of
  /// waking another (nullptr from outside the scheduler).
  caf::error deliver(const protocol::ActorMessage& m, const uint8_t* data,
                     size_t len, actor_credit credit, caf::execution_unit* ctx);
  /// Counts a whole message from the peer against our window (`credit`
  /// returns it when it goes); an error when the peer exceeds the window.
  caf::error no_memory_for_partial(caf::execution_unit* ctx);
  caf::error admit(const protocol::ActorMessage& m, uint64_t total,
                   actor_credit& credit);
  /// Hands one message (`data`/`len`, or `region` when valid) to the agent
  /// now or queues it behind others or for credit; an error when the
  /// queue is full (nothing done then).
  caf::error post_locked(const caf::strong_actor_ptr& agent,
                         const frame_head& head, const char* data, size_t len,
                         local_mr region, caf::execution_unit* ctx);
  /// Appends one message to the outbox, waking the agent when it was
  /// empty.
  void hand_to_agent_locked(const caf::strong_actor_ptr& agent,
                            const frame_head& head, const char* data,
                            size_t len, local_mr region,
                            caf::execution_unit* ctx);
  /// Hands queued messages the window now allows to the agent.
  void drain_locked();

  /// Records our request `key` (replacing an entry of the same key) in a
  /// spare node when one is kept.  Under mtx_.
  void add_pending_locked(const pending_key& key, pending_request req);

  /// Removes the request at `i` and returns it, keeping its node as a
  /// spare.  Under mtx_.
  pending_request take_pending_locked(pending_map::iterator i);
  void answer_peer(uint64_t peer_sender, caf::message_id mid, caf::error err,
                   caf::execution_unit* ctx);
  /// Refuses the peer's message `msg` to our typed actor `target` (id `id`)
  /// when no signature of its interface takes it; untyped actors take
  /// anything (their behavior decides).  `sigs`: its interface when
  /// known already (read once per actor and kept).  The agent's thread.
  caf::error check_interface(uint64_t id, const caf::strong_actor_ptr& target,
                             const caf::message& msg,
                             std::shared_ptr<const std::set<std::string>> sigs);
  /// Whether the `len` bytes at `data` of a message hold a handle of one
  /// of our actors (or our node id): they hold our node's secret.
  /// `node_ids`: the codec saw a node id go through (else nothing is
  /// looked for).  Any thread.
  bool names_this_node(bool node_ids, const char* data, size_t len) const;
  void prune_locked();
  /// Makes the actors of our node whose handles CAF wrote into `bytes`
  /// (their ids, serialized_local_ids) reachable by the peer, and tells it
  /// when one ends (down_watch).  Returns the ones to watch; the caller
  /// attaches the watches outside the lock.
  std::vector<std::pair<uint64_t, caf::strong_actor_ptr>>
  export_handles_locked(const std::vector<uint64_t>& ids);
  /// Attaches a down_watch to each of `actors` (not under the lock: an
  /// actor that ended already runs it at once).
  void
  watch(const std::vector<std::pair<uint64_t, caf::strong_actor_ptr>>& actors);
  /// The proxy a handle in the peer's message names (CAF's proxy registry
  /// asks, through the resolver, on the agent's thread); null with
  /// `resolve_refusal_` set when the handle names a node other than the
  /// peer's, or past tuning::max_peer_proxies.
  caf::strong_actor_ptr proxy_for_handle(const caf::node_id& nid,
                                         caf::actor_id aid);

  /// Whether `actor` is a proxy (ours or CAF's) of another node's actor.
  bool is_proxy(caf::actor_control_block& actor) const;
  /// Whether `close` ran.
  bool closed() const;
  /// The refusal when tuning::max_peer_proxies proxies live.
  caf::error too_many_proxies() const;

  class handle_resolver;

  caf::actor_system& sys_;
  options opts_;
  std::string peer_;
  actor_directory own_;
  actor_directory_ptr node_dir_;
  mutable std::mutex mtx_;
  bool closed_ = false;
  caf::error closed_reason_;
  caf::weak_actor_ptr agent_;
  /// Where large serializations go (set_agent), and from what size (read
  /// without the lock: a small message needs neither).
  memory_pool_ptr pool_;
  std::atomic<size_t> region_from_bytes_{SIZE_MAX};
  /// Local actors the peer may address, by their actor id.
  std::unordered_map<uint64_t, caf::weak_actor_ptr> exports_;
  /// The interfaces of exported actors the peer sent messages to, by id
  /// (pruned with exports_; CAF never reuses an actor id in a process).
  std::unordered_map<uint64_t, std::shared_ptr<const std::set<std::string>>>
      interfaces_;
  size_t exports_prune_at_ = 1024;
  /// Our proxies, by the peer's actor id: each lives until the peer says
  /// its actor ended (a down notice) or the connection goes, as CAF io's
  /// proxies do (at most tuning::max_peer_proxies).
  std::unordered_map<uint64_t, caf::strong_actor_ptr> proxies_;
  /// Our requests to the peer's actors that wait for an answer.
  pending_map pending_;
  /// Nodes of answered requests kept for the next ones (at most
  /// max_spare_pending): a request costs the map no allocation once warm.
  std::vector<pending_map::node_type> spare_pending_;
  static constexpr size_t max_spare_pending = 16;
  /// Actors of ours whose handles we sent the peer and that this
  /// connection holds in the actor registry (hold_handed) until they end
  /// or the connection does.
  std::unordered_set<uint64_t> handed_;
  /// Published actors whose end we tell the peer (an attachable each,
  /// detached at close).
  std::unordered_map<uint64_t, caf::weak_actor_ptr> watched_;
  /// Touched by the agent's thread only.
  partial partial_;
  /// Our messages to the peer's actors: the window and what waits for it.
  actor_outflow outflow_;
  ring_deque<queued_frame> queue_;
  /// Messages handed to the agent that it has not taken yet.
  actor_outbox outbox_;
  uint64_t queued_bytes_ = 0;
  uint64_t send_refused_ = 0;
  uint64_t acks_received_ = 0;
  /// The peer's messages to our actors.
  actor_inflow_ptr inflow_;
  /// The random part of our node id (none: the system has no
  /// system_hook, so no node id); see names_this_node.
  std::optional<std::array<uint8_t, 20>> secret_;
  /// The node the peer's handles name (pinned by its first handle).
  caf::node_id peer_node_;
  /// CAF's proxy registry for the handles in the peer's messages and the
  /// execution unit the deserializer runs with (the agent's thread).
  std::unique_ptr<handle_resolver> resolver_;
  /// Why the last resolution of a handle failed.  The agent's thread.
  caf::error resolve_refusal_;
  /// The type lists of the peer's messages, loaded without a lookup by
  /// name per element (made at the first message: most connections of a
  /// large node carry no actor messages).  The agent's thread.
  std::unique_ptr<message_signatures> signatures_;
};

using remote_actors_ptr = std::shared_ptr<remote_actors>;

} // namespace rdmactor
