#pragma once

// Internal to the agent: the remote actors' part of the protocol core.
// Not installed.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/core/core_port.hpp"
#include "actors/core/in_order_reader.hpp"
#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/local_mr.hpp"

namespace rdmactor {

/// The remote actors' frames of one connection: ActorLookup both ways,
/// ActorMessage (eager in one frame, chunked, or by rendezvous: the peer
/// READs the serialization from our registered memory), ActorAck, and
/// the budget of the peer's actor messages in flight (the chunked one being
/// reassembled, the ones held behind a rendezvous READ).  The CAF side
/// (proxies, serialization, delivery) is behind the sink
/// (actors/remote/remote_actors.hpp).
///
/// Part of `agent_core`, which routes the peer's actor frames here and
/// lends its services through `core_port`; single-threaded like it.
class actor_channel {
public:
  using time_point = core_port::time_point;

  explicit actor_channel(core_port& core) : core_(core) {}

  actor_channel(const actor_channel&) = delete;
  actor_channel& operator=(const actor_channel&) = delete;

  // -- our side ---------------------------------------------------------------

  /// Asks the peer for the actor published under `name` (ActorLookup);
  /// `done` gets its id (0: nothing published under the name) and
  /// interface, or an error: `not_negotiated` for a peer whose Hello did
  /// not offer remote actors, the usual request errors otherwise.
  void lookup(const std::string& name,
              std::vector<std::string> expected_interface, time_point now,
              std::function<void(caf::expected<actor_lookup_result>)> done);

  /// Posts one serialized CAF message for the peer's actor `target`
  /// (ActorMessage).  One that does not fit one frame goes by rendezvous to
  /// a peer that offered it (copied once into registered memory the peer
  /// reads; freed when the peer answers or the request times out), in
  /// chunks of the max message length otherwise (back to back: nothing
  /// comes between them).  Fails (nothing posted) after close or when the
  /// peer did not offer remote actors.
  caf::error post(uint64_t target, uint64_t sender, uint64_t message_id,
                  const char* data, size_t len, bool down);

  /// The same for a serialization already in registered memory of our
  /// pool (`bytes`, all of it): posted from there without another copy.
  caf::error post(uint64_t target, uint64_t sender, uint64_t message_id,
                  local_mr bytes, bool down);

  /// Posts an ActorAck returning credit for the peer's actor messages
  /// (cumulative counts); nothing after close.
  void post_ack(uint64_t messages, uint64_t bytes);

  /// Our Hello offers rendezvous actor messages (EXT_ACTOR_RENDEZVOUS):
  /// remote actors on and rendezvous offered.
  bool offers_rendezvous() const noexcept;

  /// Actor messages over the eager size go to the peer by rendezvous: its
  /// Hello offered EXT_ACTOR_RENDEZVOUS and remote actors.
  bool rendezvous_to_peer() const noexcept;

  // -- the peer's frames (from the core's responder) --------------------------

  void on_lookup(uint64_t id, const protocol::ActorLookup& req);
  /// An eager ActorMessage (or one chunk of one) and its payload.
  void on_message(const protocol::ActorMessage& m,
                  const protocol::decode_result& frame);
  /// A rendezvous ActorMessage: a request naming the serialization to read.
  void on_rendezvous(uint64_t id, const protocol::ActorMessage& m);
  void on_ack(const protocol::ActorAck& m);

  // -- the peer's budget ------------------------------------------------------

  /// Bytes held behind or in a rendezvous READ.
  uint64_t held_bytes() const noexcept {
    return inbound_.bytes();
  }

  /// The earliest deadline of a READ in flight, and whether one is past
  /// it at `now` (the core then ends the connection).
  std::pair<time_point, bool> read_deadlines(time_point now) const {
    return inbound_.deadlines(now);
  }

  /// Drops the chunked actor message being reassembled when its deadline
  /// passed at `now`; returns its deadline otherwise (`time_point::max()`:
  /// none).
  time_point expire_partial(time_point now);

  /// Forgets what waits (at close: the sink fails the rest).
  void clear() {
    inbound_.clear();
  }

private:
  /// An actor message from the peer, delivered in arrival order while a
  /// rendezvous one before it is being read.
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

  caf::error post(uint64_t target, uint64_t sender, uint64_t message_id,
                  const char* data, size_t len, local_mr region, bool down);
  caf::error post_rendezvous(protocol::ActorMessage head, local_mr region);
  caf::error check_rendezvous(const protocol::ActorMessage& m,
                              protocol::Status& status) const;
  void on_read_done(uint64_t seq, const caf::error& err);
  void drain();
  void deliver(const protocol::ActorMessage& m, const uint8_t* data,
               size_t len);
  void track_partial();

  core_port& core_;
  /// Actor messages from the peer in arrival order, held while a READ of
  /// an earlier rendezvous one is in flight (their bytes count against
  /// peer-max-queued-bytes).
  in_order_reader<inbound_actor> inbound_;
  /// The peer's chunked actor message being reassembled (the sink holds
  /// it) started at `partial_since_`; its deadline does not move.
  bool partial_ = false;
  time_point partial_since_{};
};

} // namespace rdmactor
