#pragma once

// Internal to the agent: SendData, both ways, in the protocol core.  Not
// installed.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/core/ack_gatherer.hpp"
#include "actors/core/core_port.hpp"
#include "actors/core/in_order_reader.hpp"
#include "actors/core/send_data_stream.hpp"
#include "common/block_recycler.hpp"
#include "common/tuning.hpp"
#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/local_mr.hpp"

namespace rdmactor {

/// The SendData frames of one connection, both ways: our transfers in
/// chunks (`send_data_stream`; eager slices, or rendezvous pieces the peer
/// READs from our memory), the peer's chunks delivered in order (zero-copy
/// receive buffers or a copy; a rendezvous chunk READ into memory of ours,
/// the ones after it held until it is whole), and the acknowledgements:
/// gathered into one cumulative response (`ack_gatherer`), or riding on
/// our next SendData (EXT_PIGGYBACK_ACKS).
///
/// Part of `agent_core`, which routes SendData requests, answers and the
/// Hello's fields here and lends its services through `core_port`;
/// single-threaded like it.
class data_channel {
public:
  using time_point = core_port::time_point;

  explicit data_channel(core_port& core) : core_(core) {}

  data_channel(const data_channel&) = delete;
  data_channel& operator=(const data_channel&) = delete;

  // -- our side ---------------------------------------------------------------

  /// Sends `mr` as SendData in chunks that fit the max message length, at
  /// most `send_data_window` in flight; `done` gets the bytes sent once
  /// the peer acknowledged every chunk, or the first error (`done` may be
  /// empty; what it throws is caught and logged).  Each chunk's
  /// deadline starts when it is issued.  At close the chunks in flight
  /// fail with the close error (`done` once) and no more are issued.
  void send(local_mr mr, time_point now,
            std::function<void(caf::expected<uint64_t>)> done,
            std::optional<uint32_t> imm = std::nullopt);

  /// Sends the gathered acknowledgements in one response (the owner calls
  /// it after `agent_sink::schedule_ack_flush`); nothing after close.
  void flush_acks();

  /// Whether gathered acknowledgements wait that our next SendData may
  /// carry instead of a response of their own (the peer's Hello offered
  /// EXT_PIGGYBACK_ACKS).  The owner may then hold a scheduled
  /// `flush_acks` back a little, giving the user who took the data a
  /// chance to answer with a send of its own (see the agent actor).
  bool acks_may_ride() const noexcept;

  /// Acknowledges the peer's request `id` (OK): at once, or gathered into
  /// one cumulative response when the peer takes those.
  void ack(uint64_t id);

  // -- the peer ---------------------------------------------------------------

  /// What the peer's Hello says about SendData: whether it takes
  /// cumulative acknowledgements, and how many bytes it READs at once
  /// (0: it takes no rendezvous).
  void peer_hello(bool cumulative_acks, uint64_t max_rendezvous_bytes) {
    peer_takes_cumulative_acks_ = cumulative_acks;
    peer_max_rendezvous_bytes_ = max_rendezvous_bytes;
  }

  /// Payloads over the eager size go to the peer by rendezvous.
  bool rendezvous_to_peer() const noexcept;

  /// The peer's SendData `id`; its eager payload is `frame`'s in `buf`.
  void on_send_data(uint64_t id, const protocol::SendData& req,
                    const local_mr& buf, const protocol::decode_result& frame);

  /// Completes the requests of ours that the peer's SendData acknowledges
  /// (SendData.acked).
  void on_piggybacked_acks(const protocol::SendData& req);

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

  /// Forgets what waits (at close).
  void clear() {
    inbound_.clear();
  }

private:
  /// A SendData chunk from the peer, delivered in arrival order.
  struct inbound_chunk {
    uint64_t id = 0; // the peer's request id
    local_mr chunk;
    std::optional<uint32_t> imm;
  };

  void pump(const std::shared_ptr<send_data_stream>& s);
  request_table::completion_fn
  chunk_answer(const std::shared_ptr<send_data_stream>& s, size_t len);
  bool issue_rendezvous_chunk(const std::shared_ptr<send_data_stream>& s);
  size_t acks_that_fit(size_t room) const noexcept;
  void acks_attached(size_t n);
  void on_send_data_rendezvous(uint64_t id, const protocol::SendData& req);
  caf::error check_rendezvous(const protocol::SendData& req,
                              protocol::Status& status) const;
  void deliver_in_order(uint64_t id, local_mr chunk,
                        std::optional<uint32_t> imm);
  void on_read_done(uint64_t seq, const caf::error& err);
  void drain_in_order();

  core_port& core_;
  /// The blocks of finished streams (each with its shared_ptr control
  /// block), reused by the next `send`.
  std::shared_ptr<block_recycler> streams_
      = std::make_shared<block_recycler>(tuning::recycled_streams);
  /// The peer's Hello offered cumulative acknowledgements.
  bool peer_takes_cumulative_acks_ = false;
  /// The peer's Hello.max_rendezvous_bytes (0: it takes no rendezvous).
  uint64_t peer_max_rendezvous_bytes_ = 0;
  /// Ids to acknowledge (OK) in one response at the next flush, or on our
  /// next SendData.
  ack_gatherer acks_;
  /// The peer's chunks in arrival order, held while a READ of an earlier
  /// rendezvous chunk is in flight; their bytes count against
  /// peer-max-queued-bytes with the unclaimed chunks.
  in_order_reader<inbound_chunk> inbound_;
};

} // namespace rdmactor
