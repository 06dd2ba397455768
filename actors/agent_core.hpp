#pragma once

// Internal to the agent: the protocol logic of one connection without an
// actor.  The agent actor (actors/agent*.cpp) feeds it inbound frames, user
// requests and the time, and carries out its effects (posts, deliveries,
// disconnects) through `agent_core::sink`.  Not installed.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "actors/ack_gatherer.hpp"
#include "actors/agent_sink.hpp"
#include "actors/held_regions.hpp"
#include "actors/hello_waiters.hpp"
#include "actors/in_order_reader.hpp"
#include "actors/liveness.hpp"
#include "actors/peer_guard.hpp"
#include "actors/request_table.hpp"
#include "actors/send_data_stream.hpp"
#include "common/logging.hpp"
#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/agent_stats.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/local_mr.hpp"
#include "rdmactor/memory_pool.hpp"
#include "rdmactor/mr_token.hpp"
#include "rdmactor/options.hpp"
#include "rdmactor/transport/link_params.hpp"

namespace rdmactor {

/// The agent protocol of one connection, free of actors: quotas and
/// validation of the untrusted peer's frames, requests to the peer (their
/// ids and deadlines in a `request_table`), cumulative acknowledgements,
/// the regions held for the peer and its liveness (`liveness`).
///
/// Single-threaded: the owner (the agent actor, or a test) calls it from
/// one thread.  Time never comes from a clock here: every entry point that
/// may start or end a request takes `now`, so a test drives time
/// deterministically.  Effects go out through the `sink` given at
/// construction; the core calls it synchronously, and the sink must not
/// call the core's non-const members from inside those calls (it may
/// schedule a later call, e.g. the ack flush).
class agent_core {
public:
  using clock_type = std::chrono::steady_clock;
  using time_point = clock_type::time_point;

  /// Called once with the peer's response to a request (then `err` is
  /// empty and `res` set), or with an error (`res` null): timeout, send
  /// failure, connection gone.
  using completion_fn = request_table::completion_fn;

  /// Where the core's effects go (actors/agent_sink.hpp).
  using sink = agent_sink;

  /// Builds the core of the connection `link`; `out` must outlive it.
  agent_core(sink& out, options opts, transport::link_params link,
             memory_pool_ptr pool);

  agent_core(const agent_core&) = delete;
  agent_core& operator=(const agent_core&) = delete;

  /// Drops what is still owned for the peer: call `take_owned` first when
  /// the memory must outlive the connection's queue pair.
  ~agent_core();

  // -- accessors --------------------------------------------------------------

  const options& opts() const noexcept {
    return opts_;
  }

  const transport::link_params& link() const noexcept {
    return link_;
  }

  /// What an operation fails with once the connection closed: `peer_gone`
  /// naming the peer.  The one wording of it, for the core and the actor.
  caf::error peer_gone_error() const {
    return make_error(errc::peer_gone, "the peer " + link_.peer + " is gone");
  }

  const memory_pool_ptr& pool() const noexcept {
    return pool_;
  }

  /// Returns whether `close` ran.
  bool closed() const noexcept {
    return closed_;
  }

  /// Returns the counters, with the owned regions, pending requests and
  /// the peer's allocated bytes filled in.  Called by the owner's stats
  /// request, which fills in the queue fields it owns.
  agent_stats stats() const;

  /// Returns whether the peer's Hello offered Goodbye (graceful close).
  bool peer_offers_goodbye() const noexcept {
    return live_.peer_offers_goodbye();
  }

  /// Returns whether the peer sent Goodbye: it closed the connection on
  /// purpose.  The owner checks it after `on_frame` and then ends the
  /// connection with `peer_closed` (the core serves nothing after it).
  bool peer_said_goodbye() const noexcept {
    return live_.peer_said_goodbye();
  }

  /// The reason the peer's Goodbye gave (printable, bounded); empty
  /// before one arrived.
  const std::string& goodbye_reason() const noexcept {
    return live_.goodbye_reason();
  }
  /// Returns whether the peer's Hello arrived and set `extension` (a bit of
  /// protocol::Extension) in Hello.extensions.
  bool peer_offers(uint32_t extension) const noexcept {
    return hello_seen_ && (peer_extensions_ & extension) != 0;
  }

  /// Returns the extensions our Hello offers (from the options).
  uint32_t our_extensions() const noexcept;

  /// Whether our Hello offers rendezvous (EXT_RENDEZVOUS): the eager size
  /// is below max-message-len-bytes, so payloads over it are read with
  /// RDMA READ.
  bool offers_rendezvous() const noexcept;

  /// Whether send_data sends payloads over the eager size by rendezvous:
  /// the peer's Hello offered it.
  bool rendezvous_to_peer() const noexcept;

  /// Whether our Hello offers rendezvous actor messages
  /// (EXT_ACTOR_RENDEZVOUS): remote actors on and rendezvous offered.
  bool offers_actor_rendezvous() const noexcept;

  /// Whether actor messages over the eager size go to the peer by
  /// rendezvous: its Hello offered EXT_ACTOR_RENDEZVOUS.
  bool actor_rendezvous_to_peer() const noexcept;

  /// Returns the request timeout from the options.
  std::chrono::milliseconds request_timeout() const noexcept {
    return std::chrono::milliseconds{opts_.request_timeout_ms};
  }

  // -- lifecycle --------------------------------------------------------------

  /// Posts our Hello (called once by the owner when the connection starts).
  void start();

  /// Fails every pending request with `err` and refuses new ones
  /// (`peer_gone`); idempotent.  Called by the owner's shutdown.  The
  /// owned regions stay until `take_owned`: the peer may still reach them
  /// until its queue pair is closed.  Logs how many lines about the peer
  /// its log budget suppressed, if any.
  void close(const caf::error& err);

  /// Hands over every region held for the peer and resets its quota
  /// (called by the owner, at shutdown, to keep them alive until the
  /// transport terminated).
  owned_regions take_owned();

  /// Encodes our Goodbye (graceful close) for the owner to post last, or
  /// an error when the peer did not offer Goodbye (then it gets none: its
  /// connection simply goes, as before) or already said its own.  Called by
  /// the owner when the user closes the connection, before `close`.
  caf::expected<std::vector<uint8_t>> goodbye_frame(const std::string& reason);

  // -- keepalive (agent_core_keepalive.cpp, actors/liveness.hpp) ------------

  /// What the owner's keepalive timer should do (see `keepalive`).
  struct keepalive_step {
    /// The peer was silent for keepalive-ms after our Ping (which itself
    /// went out after keepalive-ms of silence): end the connection with
    /// this error (`peer_gone`).  Empty otherwise.
    caf::error dead;
    /// When to call `keepalive` again; `time_point::max()` when keepalive
    /// is off (option 0, a peer that did not offer it, or closed).
    time_point next = time_point::max();
  };

  /// Runs the keepalive at `now`: after `keepalive_silence()` without any
  /// frame from the peer, posts a Ping (one at a time); if nothing arrived
  /// for keepalive-ms after it, the peer is dead or frozen.  Called by the
  /// owner's keepalive timer at the time this returned last (earlier is
  /// harmless); a frame from the peer postpones everything (any frame is a
  /// sign of life), so a busy connection sends no Ping.  Nothing after
  /// close.
  keepalive_step keepalive(time_point now);

  /// Whether keepalive runs on this connection (option not 0 and the
  /// peer's Hello offered it); false until the peer's Hello arrived.
  bool keepalive_active() const noexcept;

  /// How long the peer may be silent before we ping it: a random share
  /// of keepalive-ms in [3/4, 1] (`liveness::staggered`).
  std::chrono::milliseconds keepalive_silence() const noexcept {
    return live_.silence();
  }

  // -- events -----------------------------------------------------------------

  /// Handles one inbound frame (request, response or Hello) that arrived in
  /// `buf`; never trusts it.  Called by the owner for every frame the
  /// transport received; answers go out through the sink.  The owner stops
  /// calling it after close (a frame then would still be served, but never
  /// disconnects again).
  void on_frame(const local_mr& buf, time_point now);

  /// Sends the gathered SendData acknowledgements in one response (called
  /// by the owner after `sink::schedule_ack_flush`); nothing after close.
  void flush_acks();

  /// Whether gathered acknowledgements wait that our next SendData may
  /// carry instead of a response of their own (the peer's Hello offered
  /// EXT_PIGGYBACK_ACKS).  The owner may then hold a scheduled
  /// `flush_acks` back a little, giving the user who took the data a
  /// chance to answer with a send of its own (see the agent actor).
  bool acks_may_ride() const noexcept;

  /// Completes every request whose deadline is at or before `now` with
  /// `request_timeout`.  Returns the earliest deadline left, or
  /// `time_point::max()` when nothing waits.  Called by the owner's sweep.
  time_point expire(time_point now);

  /// Handles the peer's RDMA WRITE with immediate data (the transport's
  /// `imm_arrived`): delivers `imm` through the sink, or, when we did not
  /// offer immediate data or peer-max-queued-imms values wait unclaimed,
  /// drops it as protocol noise (counted, logged rate-limited).  Called by
  /// the owner; nothing after close.
  void on_write_imm(uint32_t imm, uint64_t bytes, time_point now);

  // -- requests to the peer ---------------------------------------------------

  /// Calls `fn` once the peer's Hello says whether it offers `extension`
  /// (a bit of protocol::Extension): with no error when it does, with
  /// `not_negotiated` (naming `what`) when not.  Before the Hello arrives
  /// the call waits (up to request_timeout_ms: `expire` fails it with
  /// `request_timeout`; `close` with the close error), bounded with the
  /// pending requests by peer-max-pending-requests.  Called by operations
  /// that need an extension (send_data with a value, tagged SendMR) and
  /// by the owner's write_with_imm.
  void when_offered(uint32_t extension, const char* what, time_point now,
                    std::function<void(const caf::error&)> fn);

  /// Returns a fresh request id, not pending (request_table::new_id: the
  /// next request's slot under random bits).  Called by the core's own
  /// requests and by tests.
  uint64_t new_request_id();

  /// Sends the request `msg` with `payload` behind it and calls `done` with
  /// the response or an error (encoding, too many pending, timeout).  Called
  /// by the operations below and by tests.  A pending request fails with
  /// the error given to `close`; after close `done` fails at once
  /// (`peer_gone`).
  void send_request(protocol::Message msg, local_mr payload, completion_fn done,
                    time_point now);

  /// Asks the peer for `size` bytes aligned to `align` (AllocMR); `done`
  /// gets the token or an error.  Called by the owner's request_remote_mr.
  /// A late OK answer after a timeout is released at once; a request
  /// pending at close fails with the close error.
  void alloc_remote(uint64_t size, uint64_t align, time_point now,
                    std::function<void(caf::expected<mr_token>)> done);

  /// The same; `done` also gets the region's lease in milliseconds (0:
  /// none; AllocMRResponse.lease_ms).
  void alloc_remote_leased(
      uint64_t size, uint64_t align, time_point now,
      std::function<void(caf::expected<mr_token>, uint32_t)> done);

  /// Lends `mr` to the peer (SendMR LOCAL), keeping it alive in the owned
  /// table until the peer releases it or the connection ends; `done` gets
  /// the token or an error (then the region is no longer owned).  Called by
  /// the owner's send_mr(local_mr).  A request pending at close fails with
  /// the close error and the region stays owned until `take_owned`.
  /// With `lease_ms` > 0 (a peer that offered EXT_LEASES, else
  /// `not_negotiated`), the token names a registration of its own over
  /// `mr` that is revoked (deregistered, the region dropped from the owned
  /// table) `lease_ms` after the lending unless the peer renews it
  /// (`expire` ends leases).
  void lend(local_mr mr, time_point now,
            std::function<void(caf::expected<mr_token>)> done, uint64_t tag = 0,
            uint32_t lease_ms = 0);

  /// Asks the lender of `token` to extend its lease by `lease_ms`
  /// (RenewLease); `done` gets the granted milliseconds, or
  /// `lease_expired` when the lender no longer holds the lease.  Called by
  /// the owner's renew_lease; a request pending at close fails with the
  /// close error.
  void renew_lease(const mr_token& token, uint32_t lease_ms, time_point now,
                   std::function<void(caf::expected<uint32_t>)> done);

  /// Hands the peer's region `token` back to it (SendMR REMOTE); `done`
  /// gets an empty error on success.  Called by the owner's
  /// send_mr(remote_mr); a request pending at close fails with the close
  /// error.
  void give_back(const mr_token& token, time_point now,
                 std::function<void(const caf::error&)> done, uint64_t tag = 0);

  /// Releases the peer's region `token` (ReleaseMR); `done` gets an empty
  /// error on success.  Called by the owner's release (a user's call, or a
  /// dropped remote_mr without `done`: then a failure other than the
  /// connection's end is logged) and for late AllocMR answers.  A request
  /// pending at close fails with the close error.
  void release_remote(const mr_token& token, time_point now,
                      std::function<void(const caf::error&)> done = {});

  /// Sends `mr` as SendData in chunks that fit the max message length, at
  /// most `send_data_window` in flight; `done` gets the bytes sent once
  /// the peer acknowledged every chunk, or the first error.  Each chunk's
  /// deadline starts when it is issued.  Called by the owner's send_data;
  /// at close the chunks in flight fail with the close error (`done` once)
  /// and no more are issued.
  void send_data(local_mr mr, time_point now,
                 std::function<void(caf::expected<uint64_t>)> done,
                 std::optional<uint32_t> imm = std::nullopt);

  // -- remote actors (agent_core_actors.cpp) ----------------------------------

  /// Asks the peer for the actor published under `name` (ActorLookup);
  /// `done` gets its id (0: nothing published under the name) and
  /// interface, or an error: `not_negotiated` for a peer whose Hello did
  /// not offer remote actors, the usual request errors otherwise.  Called
  /// by the owner's lookup; a request pending at close fails with the
  /// close error.
  void
  lookup_actor(const std::string& name,
               std::vector<std::string> expected_interface, time_point now,
               std::function<void(caf::expected<actor_lookup_result>)> done);

  /// Posts one serialized CAF message for the peer's actor `target`
  /// (ActorMessage).  One that does not fit one frame goes by rendezvous to
  /// a peer that offered it (copied once into registered memory the peer
  /// reads; freed when the peer answers or the request times out), in
  /// chunks of the max message length otherwise (back to back: nothing
  /// comes between them).  Called by
  /// the owner for what a proxy forwarded; fails (nothing posted) after
  /// close or when the peer did not offer remote actors.
  caf::error post_actor_message(uint64_t target, uint64_t sender,
                                uint64_t message_id, const char* data,
                                size_t len, bool down);

  /// The same for a serialization already in registered memory of our
  /// pool (`bytes`, all of it): posted from there without another copy.
  caf::error post_actor_message(uint64_t target, uint64_t sender,
                                uint64_t message_id, local_mr bytes, bool down);

  /// Posts an ActorAck returning credit for the peer's actor messages
  /// (cumulative counts).  Called by the owner when its targets took
  /// enough of them; nothing after close.
  void post_actor_ack(uint64_t messages, uint64_t bytes);

  // -- helpers ----------------------------------------------------------------

  /// Turns a non-OK response status into an error (`what` names the
  /// request).
  static caf::error status_error(const protocol::Response& res,
                                 const char* what);

  /// Checks that `res` answers a request of kind `expected` with status OK:
  /// another kind is `malformed_message`, a refusal carries the peer's
  /// code.
  static caf::error check_response(const protocol::Response& res,
                                   protocol::Response::BodyCase expected,
                                   const char* what);

private:
  /// A SendData chunk from the peer, delivered in arrival order
  /// (agent_core_rendezvous.cpp).
  struct inbound_chunk {
    uint64_t id = 0; // the peer's request id
    local_mr chunk;
    std::optional<uint32_t> imm;
  };

  /// An actor message from the peer, delivered in arrival order while a
  /// rendezvous one before it is being read (agent_core_actor_rendezvous.cpp).
  struct inbound_actor {
    /// The frame's fields (len: the whole serialization for a rendezvous).
    protocol::ActorMessage head;
    /// Rendezvous: where the READ puts the serialization.
    local_mr read_into;
    /// Eager: a copy of the frame's payload.
    std::vector<uint8_t> bytes;
    /// Refused (its READ failed, or no room for it): goes to the sink in
    /// its turn.
    caf::error why;
  };

  // requests (agent_core.cpp)
  caf::expected<std::vector<uint8_t>> encode(const protocol::Message& msg);
  caf::error post_frame(std::vector<uint8_t> header, local_mr payload);
  bool admit_request(completion_fn& done);
  void post_request(uint64_t id, std::vector<uint8_t> header, local_mr payload,
                    completion_fn done);
  void send_unsolicited(const protocol::Message& msg, bool upkeep = false);
  void pump(const std::shared_ptr<send_data_stream>& s);
  completion_fn chunk_answer(const std::shared_ptr<send_data_stream>& s,
                             size_t len);

  // the responder (agent_core_responder.cpp)
  rate_limiter::verdict may_log(spdlog::level::level_enum level);
  void end_connection(const caf::error& reason, const std::string& why);
  void count_noise(const char* what);
  void count_violation();
  void reject(const protocol::Message& res, const char* what);
  void accepted();
  void on_request(const protocol::Request& req, const local_mr& buf,
                  const protocol::decode_result& frame);
  void on_alloc_mr(uint64_t id, const protocol::AllocMR& req);
  void on_release_mr(uint64_t id, const protocol::ReleaseMR& req);
  void on_send_mr(uint64_t id, const protocol::SendMR& req);
  void on_send_data(uint64_t id, const protocol::SendData& req,
                    const local_mr& buf, const protocol::decode_result& frame);

  // rendezvous (agent_core_rendezvous.cpp)
  bool issue_rendezvous_chunk(const std::shared_ptr<send_data_stream>& s);
  void on_send_data_rendezvous(uint64_t id, const protocol::SendData& req);
  caf::error check_rendezvous(const protocol::SendData& req,
                              protocol::Status& status) const;
  caf::error check_source(const protocol::MrToken& src, uint64_t len,
                          const char* what, protocol::Status& status) const;
  caf::error check_queued(uint64_t len, protocol::Status& status) const;
  uint64_t buffered_bytes() const;
  time_point partial_deadline() const noexcept;
  void deliver_in_order(uint64_t id, local_mr chunk,
                        std::optional<uint32_t> imm);
  void on_read_done(uint64_t seq, const caf::error& err);
  void drain_in_order();
  void on_renew_lease(uint64_t id, const protocol::RenewLease& req);
  time_point expire_leases(time_point now);
  void lend_now(local_mr mr, uint64_t tag, uint32_t lease_ms,
                std::function<void(caf::expected<mr_token>)> done);
  void give_back_now(const mr_token& token, uint64_t tag,
                     std::function<void(const caf::error&)> done);
  void ack_send_data(uint64_t id);
  void on_response(const protocol::Response& res);
  void on_also_acked(const protocol::Response& res);
  size_t acks_that_fit(size_t room) const noexcept;
  void acks_attached(size_t n);
  void on_piggybacked_acks(const protocol::SendData& req);
  void complete_acked(const google::protobuf::RepeatedField<uint64_t>& ids,
                      const protocol::Response& res, uint64_t& taken);
  bool release_late_alloc(const protocol::Response& res);
  void on_hello(const protocol::Hello& hello);
  void on_goodbye(const protocol::Goodbye& bye);
  void on_pong(const protocol::Response& res);
  void on_actor_lookup(uint64_t id, const protocol::ActorLookup& req);
  void on_actor_ack(const protocol::ActorAck& m);
  void on_actor_message(const protocol::ActorMessage& m,
                        const protocol::decode_result& frame);
  void deliver_actor_frame(const protocol::ActorMessage& m, const uint8_t* data,
                           size_t len);

  // rendezvous actor messages (agent_core_actor_rendezvous.cpp)
  caf::error post_actor(uint64_t target, uint64_t sender, uint64_t message_id,
                        const char* data, size_t len, local_mr region,
                        bool down);
  caf::error post_actor_rendezvous(protocol::ActorMessage head,
                                   local_mr region);
  void on_actor_rendezvous(uint64_t id, const protocol::ActorMessage& m);
  caf::error check_actor_rendezvous(const protocol::ActorMessage& m,
                                    protocol::Status& status) const;
  void on_actor_read_done(uint64_t seq, const caf::error& err);
  void drain_actor_inbound();

  // deadlines and the budget of partial work (agent_core_partials.cpp)
  void track_partial_actor();
  time_point expire_partials(time_point now);

  sink& out_;
  options opts_;
  transport::link_params link_;
  memory_pool_ptr pool_;
  /// The time of the event being handled (deadlines of requests that
  /// completions issue, e.g. the next SendData chunk).
  time_point now_{};
  /// The memory held for the peer (peer-max-mrs, peer-max-alloc-bytes).
  held_regions held_;
  /// The peer's budgets: noise, violations in a row, log lines.
  peer_guard guard_;
  /// Our requests waiting for the peer's answers, and those that timed
  /// out (peer-max-pending-requests).
  request_table requests_;
  /// Keepalive and the peer's Goodbye.
  liveness live_;
  /// `end_connection` ran: the sink's disconnect was called.
  bool disconnected_ = false;
  /// Receive buffers held by users through zero-copy SendData chunks.
  std::shared_ptr<std::atomic<uint32_t>> held_buffers_
      = std::make_shared<std::atomic<uint32_t>>(0);
  agent_stats counters_;
  bool closed_ = false;
  /// The peer's Hello offered cumulative SendData acknowledgements.
  bool peer_takes_cumulative_acks_ = false;
  /// The peer's Hello arrived; what its extensions field said.
  bool hello_seen_ = false;
  uint32_t peer_extensions_ = 0;
  /// Operations waiting for the peer's Hello.
  hello_waiters hello_waiters_;
  /// SendData ids to acknowledge (OK) in one response at the next flush,
  /// or on our next SendData.
  ack_gatherer acks_;
  /// Rendezvous: the peer's Hello.max_rendezvous_bytes (0: it does not
  /// take rendezvous).
  uint64_t peer_max_rendezvous_bytes_ = 0;
  /// SendData chunks from the peer in arrival order, held while a READ of
  /// an earlier rendezvous chunk is in flight (data arrives in order); the
  /// bytes they hold count against peer-max-queued-bytes with the
  /// unclaimed chunks.
  in_order_reader<inbound_chunk> inbound_;
  /// Actor messages from the peer in arrival order, held while a READ of
  /// an earlier rendezvous one is in flight (their bytes count against
  /// peer-max-queued-bytes too).
  in_order_reader<inbound_actor> actor_inbound_;
  /// The peer's chunked actor message being reassembled (the sink holds
  /// it) started at `actor_partial_since_`; its deadline does not move.
  bool actor_partial_ = false;
  time_point actor_partial_since_{};
};

} // namespace rdmactor
