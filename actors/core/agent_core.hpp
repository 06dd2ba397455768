#pragma once

// Internal to the agent: the protocol logic of one connection without an
// actor.  The agent actor (actors/connection/) feeds it inbound frames, user
// requests and the time, and carries out its effects (posts, deliveries,
// disconnects) through `agent_core::sink`.  Not installed.

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "actors/core/actor_channel.hpp"
#include "actors/core/agent_sink.hpp"
#include "actors/core/core_port.hpp"
#include "actors/core/data_channel.hpp"
#include "actors/core/hello_waiters.hpp"
#include "actors/core/liveness_channel.hpp"
#include "actors/core/mr_exchange.hpp"
#include "actors/core/peer_guard.hpp"
#include "actors/core/request_table.hpp"
#include "common/logging.hpp"
#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/agent_stats.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/local_mr.hpp"
#include "rdmactor/memory_pool.hpp"
#include "rdmactor/options.hpp"
#include "rdmactor/transport/link_params.hpp"

namespace rdmactor {

/// The agent protocol of one connection, free of actors: it decodes and
/// validates the untrusted peer's frames and routes them to its components
/// (SendData: `data_channel`; AllocMR, ReleaseMR, SendMR, RenewLease:
/// `mr_exchange`; remote actors: `actor_channel`; Ping, Pong, Goodbye:
/// `liveness_channel`), which reach it through `core_port`; it keeps our
/// requests (`request_table`), the peer's budgets (`peer_guard`) and what
/// the peer's Hello offered.
///
/// Single-threaded: the owner (the agent actor, or a test) calls it from
/// one thread.  Time never comes from a clock here: every entry point that
/// may start or end a request takes `now`, so a test drives time
/// deterministically.  Effects go out through the `sink` given at
/// construction; the core calls it synchronously, and the sink must not
/// call the core's non-const members from inside those calls (it may
/// schedule a later call, e.g. the ack flush).
class agent_core final : private core_port {
public:
  using clock_type = std::chrono::steady_clock;
  using time_point = clock_type::time_point;

  /// The completion of a request (request_table::completion_fn).
  using completion_fn = request_table::completion_fn;

  /// Where the core's effects go (actors/core/agent_sink.hpp).
  using sink = agent_sink;

  /// Builds the core of the connection `link`; `out` must outlive it.
  agent_core(sink& out, options opts, transport::link_params link,
             memory_pool_ptr pool);

  agent_core(const agent_core&) = delete;
  agent_core& operator=(const agent_core&) = delete;

  /// Drops what is still owned for the peer: call `take_owned` first when
  /// the memory must outlive the connection's queue pair.
  ~agent_core();

  // -- core_port's services, public for the owner (docs: core_port.hpp) ------

  const options& opts() const noexcept override;
  const transport::link_params& link() const noexcept override;
  const memory_pool_ptr& pool() const noexcept override;
  bool closed() const noexcept override;
  caf::error peer_gone_error() const override;
  bool peer_offers(uint32_t extension) const noexcept override;
  bool offers_rendezvous() const noexcept override;
  uint64_t new_request_id() override;
  void send_request(protocol::Message msg, local_mr payload, completion_fn done,
                    time_point now) override;
  void when_offered(uint32_t extension, const char* what, time_point now,
                    std::function<void(const caf::error&)> fn) override;

  // -- the connection ---------------------------------------------------------

  /// Returns the counters, with the owned regions, pending requests and
  /// the peer's allocated bytes filled in.  Called by the owner's stats
  /// request, which fills in the queue fields it owns.
  agent_stats stats() const;

  /// Returns the extensions our Hello offers (from the options).
  uint32_t our_extensions() const noexcept;

  /// Returns request-timeout-ms.
  std::chrono::milliseconds request_timeout() const noexcept;

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

  // -- events -----------------------------------------------------------------

  /// Handles the inbound frames (request, response or Hello; several when
  /// packed) that arrived in `buf`; never trusts them.  Called by the owner for
  /// every frame the transport received; answers go out through the sink.  The
  /// owner stops calling it after close (a frame then would still be served,
  /// but never disconnects again).
  void on_frame(const local_mr& buf, time_point now);

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

  // -- components -------------------------------------------------------------

  /// Keepalive (Ping, Pong) and graceful close (Goodbye).
  liveness_channel& live() noexcept {
    return live_;
  }
  const liveness_channel& live() const noexcept {
    return live_;
  }

  /// SendData both ways and its acknowledgements.
  data_channel& data() noexcept {
    return data_;
  }

  /// The memory-region requests both ways and the regions held for the
  /// peer.
  mr_exchange& regions() noexcept {
    return regions_;
  }

  /// The remote actors' frames (lookups, messages, acks).
  actor_channel& actors() noexcept {
    return actors_;
  }

private:
  // core_port's services for the components only (agent_core.cpp)
  time_point now() const noexcept override;
  void set_now(time_point now) noexcept override;
  agent_sink& out() noexcept override;
  agent_stats& counters() noexcept override;
  bool serving() const noexcept override;
  void remember_late_alloc(uint64_t id) override;
  void send_unsolicited(const protocol::Message& msg) override;
  void send_upkeep(const protocol::Message& msg) override;
  void ack_send_data(uint64_t id) override;

  // requests (agent_core.cpp)
  std::vector<uint8_t> header_buffer() override {
    return out_.header_buffer();
  }
  caf::expected<std::vector<uint8_t>>
  encode(const protocol::Message& msg) override;
  caf::error post_frame(std::vector<uint8_t> header, local_mr payload);
  bool admit_request(completion_fn& done) override;
  void post_request(uint64_t id, std::vector<uint8_t> header, local_mr payload,
                    completion_fn done) override;
  void send_unsolicited(const protocol::Message& msg, bool upkeep);

  // the responder (agent_core_responder.cpp)
  rate_limiter::verdict may_log(spdlog::level::level_enum level) override;
  void end_connection(const caf::error& reason,
                      const std::string& why) override;
  void count_noise(const char* what) override;
  void count_violation() override;
  void reject(const protocol::Message& res, const char* what) override;
  void accepted() override;
  protocol::decode_result on_one_frame(const local_mr& buf, size_t offset);
  void on_request(const protocol::Request& req, const local_mr& buf,
                  const protocol::decode_result& frame);

  // the peer's rendezvous sources (agent_core_rendezvous.cpp)
  caf::error check_source(const protocol::MrToken& src, uint64_t len,
                          const char* what,
                          protocol::Status& status) const override;
  caf::error check_queued(uint64_t len,
                          protocol::Status& status) const override;
  uint64_t buffered_bytes() const override;
  time_point partial_deadline() const noexcept override;

  // responses and Hello (agent_core_responder.cpp)
  void on_response(const protocol::Response& res);
  void on_also_acked(const protocol::Response& res);
  void complete_acked(const google::protobuf::RepeatedField<uint64_t>& ids,
                      const protocol::Response& res, uint64_t& taken) override;
  bool release_late_alloc(const protocol::Response& res);
  void on_hello(const protocol::Hello& hello);

  // deadlines and the budget of partial work (agent_core_partials.cpp)
  time_point expire_partials(time_point now);

  sink& out_;
  options opts_;
  transport::link_params link_;
  memory_pool_ptr pool_;
  /// The time of the event being handled (deadlines of requests that
  /// completions issue, e.g. the next SendData chunk).
  time_point now_{};
  /// The peer's budgets: noise, violations in a row, log lines.
  peer_guard guard_;
  /// Our requests waiting for the peer's answers, and those that timed
  /// out (peer-max-pending-requests).
  request_table requests_;
  /// `end_connection` ran: the sink's disconnect was called.
  bool disconnected_ = false;
  agent_stats counters_;
  bool closed_ = false;
  bool hello_seen_ = false; // the peer's Hello arrived, with these:
  uint32_t peer_extensions_ = 0;
  /// Operations waiting for the peer's Hello.
  hello_waiters hello_waiters_;
  /// Keepalive and the peer's Goodbye.
  liveness_channel live_;
  /// SendData both ways.
  data_channel data_{*this};
  /// The memory-region requests and the regions held for the peer
  /// (peer-max-mrs, peer-max-alloc-bytes).
  mr_exchange regions_{*this};
  /// The remote actors' frames.
  actor_channel actors_{*this};
};

} // namespace rdmactor
