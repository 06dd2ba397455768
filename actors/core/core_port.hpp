#pragma once

// Internal to the agent: what a component of the protocol core (the actor
// data and liveness channels, the memory-region exchange) may ask of the core
// that holds it.  Not installed.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/core/agent_sink.hpp"
#include "actors/core/request_table.hpp"
#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/agent_stats.hpp"
#include "rdmactor/memory_pool.hpp"
#include "rdmactor/options.hpp"
#include "rdmactor/transport/link_params.hpp"

namespace rdmactor {

/// The services of the agent core (`agent_core`) to its components: the
/// connection's facts, frames and requests to the peer, and the
/// responder's verdicts on the peer's frames.  A component holds a
/// `core_port&` and nothing else of the core, so that what it may touch is
/// written here; a test may implement it to drive a component alone.
/// Called on the owner's thread only, like the core.
class core_port {
public:
  using time_point = std::chrono::steady_clock::time_point;

  // -- the connection ---------------------------------------------------------

  virtual const options& opts() const noexcept = 0;
  virtual const transport::link_params& link() const noexcept = 0;
  virtual const memory_pool_ptr& pool() const noexcept = 0;
  /// The time of the event being handled.
  virtual time_point now() const noexcept = 0;
  /// Starts handling an event at `now` (a component's entry point that the
  /// owner calls directly, like `data_channel::send`).
  virtual void set_now(time_point now) noexcept = 0;
  /// Where the core's effects go.
  virtual agent_sink& out() noexcept = 0;
  /// The counters `stats()` reports.
  virtual agent_stats& counters() noexcept = 0;
  /// `agent_core::close` ran: nothing new starts.
  virtual bool closed() const noexcept = 0;
  /// Neither closed nor disconnected: frames are still served.
  virtual bool serving() const noexcept = 0;
  /// What an operation fails with once the connection closed: `peer_gone`
  /// naming the peer (the one wording of it, for the core and the actor).
  virtual caf::error peer_gone_error() const = 0;
  /// The peer's Hello arrived and set `extension` (a bit of
  /// protocol::Extension) in Hello.extensions.
  virtual bool peer_offers(uint32_t extension) const noexcept = 0;
  /// Our Hello offers rendezvous (EXT_RENDEZVOUS): the eager size is below
  /// max-message-len-bytes, so payloads over it are read with RDMA READ.
  virtual bool offers_rendezvous() const noexcept = 0;

  // -- to the peer ------------------------------------------------------------

  /// An empty buffer to encode a frame header into
  /// (`agent_sink::header_buffer`).
  virtual std::vector<uint8_t> header_buffer() {
    return {};
  }
  /// Encodes `msg` into a frame header buffer (no payload behind it).
  virtual caf::expected<std::vector<uint8_t>>
  encode(const protocol::Message& msg) = 0;
  /// Posts `msg` (a response, an ack, a Hello) with nothing to wait for.
  virtual void send_unsolicited(const protocol::Message& msg) = 0;
  /// The same for a keepalive Ping or Pong: upkeep, not traffic
  /// (`agent_sink::post_upkeep`).
  virtual void send_upkeep(const protocol::Message& msg) = 0;
  /// A fresh request id, not pending (`request_table::new_id`).
  virtual uint64_t new_request_id() = 0;
  /// Whether a request may go out now; else fails `done` (closed, or too
  /// many pending) and returns false.
  virtual bool admit_request(request_table::completion_fn& done) = 0;
  /// Files the admitted request `id` as pending (its deadline from `now()`)
  /// and posts its encoded frame `header` with `payload` behind.
  virtual void post_request(uint64_t id, std::vector<uint8_t> header,
                            local_mr payload, request_table::completion_fn done)
      = 0;
  /// Sends the request `msg` with `payload` behind it and calls `done` once
  /// with the response or an error (encoding, too many pending, timeout).
  /// A pending request fails with the error given to `agent_core::close`;
  /// after close `done` fails at once (`peer_gone`).
  virtual void send_request(protocol::Message msg, local_mr payload,
                            request_table::completion_fn done, time_point now)
      = 0;
  /// Calls `fn` once the peer's Hello says whether it offers `extension`:
  /// with no error when it does, with `not_negotiated` (naming `what`) when
  /// not.  Before the Hello arrives the call waits (up to
  /// request-timeout-ms; close fails it with the close error), bounded with
  /// the pending requests by peer-max-pending-requests.
  virtual void when_offered(uint32_t extension, const char* what,
                            time_point now,
                            std::function<void(const caf::error&)> fn)
      = 0;
  /// An OK answer to AllocMR request `id` that comes after its timeout is
  /// released at once (`agent_core::release_late_alloc`).
  virtual void remember_late_alloc(uint64_t id) = 0;
  /// Completes each of our pending requests in `ids` with `res` (an OK
  /// SendDataResponse), counting it in `taken`; other ids are noise.
  virtual void
  complete_acked(const google::protobuf::RepeatedField<uint64_t>& ids,
                 const protocol::Response& res, uint64_t& taken)
      = 0;
  /// Acknowledges the peer's request `id` (a SendData or a rendezvous
  /// actor message read to its end): OK, cumulative where the peer takes it.
  virtual void ack_send_data(uint64_t id) = 0;

  // -- verdicts on the peer's frames ------------------------------------------

  /// The peer's frame was well-formed and served: its run of violations ends.
  virtual void accepted() = 0;
  /// Answers with the refusal `res`, counts a protocol error and a violation.
  virtual void reject(const protocol::Message& res, const char* what) = 0;
  /// One more violation in a row; too many end the connection.
  virtual void count_violation() = 0;
  /// A harmless frame we drop (counted and logged within the budget).
  virtual void count_noise(const char* what) = 0;
  /// Ends the connection because of the peer (`why` goes to the log).
  virtual void end_connection(const caf::error& reason, const std::string& why)
      = 0;
  /// Whether a log line about the peer at `level` fits its budget.
  virtual rate_limiter::verdict may_log(spdlog::level::level_enum level) = 0;

  // -- the peer's rendezvous sources ------------------------------------------

  /// Checks a token the peer asks us to READ `len` bytes from.
  virtual caf::error check_source(const protocol::MrToken& src, uint64_t len,
                                  const char* what,
                                  protocol::Status& status) const = 0;
  /// Checks that `len` more bytes fit peer-max-queued-bytes.
  virtual caf::error check_queued(uint64_t len,
                                  protocol::Status& status) const = 0;
  /// When partial work that starts now must be done
  /// (peer-partial-timeout-ms).
  virtual time_point partial_deadline() const noexcept = 0;
  /// Every byte held for the peer that nobody claimed yet.
  virtual uint64_t buffered_bytes() const = 0;

protected:
  ~core_port() = default;
};

} // namespace rdmactor
