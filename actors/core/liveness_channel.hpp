#pragma once

// Internal to the agent: keepalive and graceful close in the protocol
// core.  Not installed.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/core/core_port.hpp"
#include "actors/core/liveness.hpp"
#include "protocol/messages.hpp"

namespace rdmactor {

/// Keepalive (Ping, Pong) and graceful close (Goodbye) of one connection,
/// both offered in Hello: the frames around `liveness`, which decides when
/// to ping and when the peer is dead.
///
/// Part of `agent_core`, which tells it of every frame (`heard`), routes
/// Ping, Pong and Goodbye here and lends its services through `core_port`;
/// single-threaded like it.
class liveness_channel {
public:
  using time_point = core_port::time_point;

  /// Keepalive with the period of the options' keepalive-ms and a silence
  /// of its own (`liveness::staggered`, from `random`).
  liveness_channel(core_port& core, uint64_t random);

  liveness_channel(const liveness_channel&) = delete;
  liveness_channel& operator=(const liveness_channel&) = delete;

  // -- keepalive --------------------------------------------------------------

  /// What the owner's keepalive timer should do (see `keepalive`).
  struct step {
    /// The peer was silent for keepalive-ms after our Ping (which itself
    /// went out after keepalive-ms of silence): end the connection with
    /// this error (`peer_gone`).  Empty otherwise.
    caf::error dead;
    /// When to call `keepalive` again; `time_point::max()` when keepalive
    /// is off (option 0, a peer that did not offer it, or closed).
    time_point next = time_point::max();
  };

  /// Runs the keepalive at `now`: after `silence()` without any frame from
  /// the peer, posts a Ping (one at a time); if nothing arrived for
  /// keepalive-ms after it, the peer is dead or frozen.  Called by the
  /// owner's keepalive timer at the time this returned last (earlier is
  /// harmless); any frame postpones everything, so a busy connection sends
  /// no Ping.  Nothing after close.
  step keepalive(time_point now);

  /// Keepalive runs on this connection (option not 0 and the peer's Hello
  /// offered it); false until the peer's Hello arrived, and after close.
  bool keepalive_active() const noexcept;

  /// How long the peer may be silent before we ping it: a random share of
  /// keepalive-ms in [3/4, 1].
  std::chrono::milliseconds silence() const noexcept {
    return live_.silence();
  }

  /// keepalive-ms: how long a Ping waits for its answer.
  std::chrono::milliseconds period() const noexcept {
    return live_.period();
  }

  /// Our node's identity, which our Hello carries (0: none); set before
  /// the Hello goes.  A peer whose Hello names its node shares liveness
  /// with our other connections to that node (`offered`).
  void set_node(uint64_t node) noexcept {
    node_ = node;
  }

  uint64_t node() const noexcept {
    return node_;
  }

  /// What the connections of our node to the peer's node share (this
  /// connection's own when either node has no identity).
  const node_liveness_ptr& group() const noexcept {
    return live_.group();
  }

  /// The connection closes (a Ping of ours no longer waits for its answer).
  void closing() noexcept {
    live_.closing();
  }

  // -- graceful close ---------------------------------------------------------

  /// The peer's Hello offered Goodbye.
  bool peer_offers_goodbye() const noexcept {
    return live_.peer_offers_goodbye();
  }

  /// The peer sent Goodbye: it closed the connection on purpose.  The
  /// owner checks it after `agent_core::on_frame` and then ends the
  /// connection with `peer_closed` (the core serves nothing after it).
  bool peer_said_goodbye() const noexcept {
    return live_.peer_said_goodbye();
  }

  /// The reason the peer's Goodbye gave (printable, bounded); empty before
  /// one arrived.
  const std::string& goodbye_reason() const noexcept {
    return live_.goodbye_reason();
  }

  /// Encodes our Goodbye for the owner to post last, or an error when the
  /// peer did not offer Goodbye (then its connection simply goes) or said
  /// its own already.  Called by the owner when the user closes the
  /// connection, before `agent_core::close`.
  caf::expected<std::vector<uint8_t>> goodbye_frame(const std::string& reason);

  // -- the peer's frames (from the core's responder) --------------------------

  /// The peer's Hello: whether it takes Goodbye and answers Ping, and its
  /// node (0: none).  With keepalive on, a node on both sides and a host
  /// in the peer's name, this connection joins the liveness of our node's
  /// connections to that node (node_liveness_registry).
  void offered(bool goodbye, bool keepalive, uint64_t peer_node = 0);

  /// A frame arrived at `now`: the peer's agent is alive.
  void heard(time_point now) noexcept {
    live_.heard(now);
  }

  void on_ping(uint64_t id);
  void on_pong(const protocol::Response& res);
  void on_goodbye(const protocol::Goodbye& bye);

private:
  core_port& core_;
  liveness live_;
  uint64_t node_ = 0;
  bool joined_ = false;
};

} // namespace rdmactor
