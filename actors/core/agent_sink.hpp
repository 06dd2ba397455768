#pragma once

// Internal to the agent: the port through which the protocol core
// (actors/core/agent_core.hpp) acts on the world, and the records it hands
// across.  Not installed.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "protocol/messages.hpp"
#include "rdmactor/local_mr.hpp"
#include "rdmactor/mr_token.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor {

/// What the peer's ActorLookup finds (remote actors): the id it addresses
/// the actor by (0: nothing published under the name) and the actor's
/// interface (empty: dynamically typed).
struct actor_lookup_result {
  uint64_t id = 0;
  std::vector<std::string> interface;
};

/// Where the effects of the agent's protocol core (`agent_core`) go: the
/// port between the core and the actor that owns it.  The agent actor
/// implements it (actors/connection/agent_state.hpp); tests implement it to
/// watch the core.  The core calls it synchronously, from the owner's thread.
class agent_sink {
public:
  virtual ~agent_sink();

  /// Posts one frame to the peer: `header` (frame header + encoded
  /// Message) with `payload` behind it (may be empty).  Nothing answers
  /// the post; a failed send takes the connection down.
  virtual void post(std::vector<uint8_t> header, local_mr payload) = 0;

  /// An empty buffer to encode the next frame header into: the agent's is
  /// one its link recycled (`link::take_header_buffer`), so the data path
  /// allocates no headers.  The default is a new one.
  virtual std::vector<uint8_t> header_buffer() {
    return {};
  }

  /// Posts a keepalive Ping or Pong (`header`, no payload): as `post`, but
  /// upkeep, not traffic, so that an idle connection's keepalive keeps no
  /// poller busy (`link::submit`'s `quiet`).  The default is `post`.
  virtual void post_upkeep(std::vector<uint8_t> header) {
    post(std::move(header), local_mr{});
  }

  /// The peer takes packed frames (EXT_PACKED_FRAMES): from now on small
  /// posts may go several to one message of at most `max_bytes`
  /// (`link::pack_sends`).  The default does nothing.
  virtual void pack_frames(size_t max_bytes) {
    static_cast<void>(max_bytes);
  }

  /// The frame being handled is a keepalive Ping or Pong: upkeep, not
  /// traffic (`link::mark_quiet`).  The default does nothing.
  virtual void upkeep_frame() {}

  /// Hands a data chunk the peer sent to the user (receive_data or the
  /// subscriber).
  virtual void deliver_data(local_mr chunk) = 0;

  /// Hands a data chunk the peer sent with the immediate value `imm`
  /// (SendData.imm) to the user.  The default drops the value.
  virtual void deliver_imm_data(local_mr chunk, uint32_t imm) {
    static_cast<void>(imm);
    deliver_data(std::move(chunk));
  }

  /// Hands the immediate value of the peer's RDMA WRITE with immediate
  /// data (`bytes` written) to the user.  The default drops it.
  virtual void deliver_write_imm(uint32_t imm, uint64_t bytes) {
    static_cast<void>(imm);
    static_cast<void>(bytes);
  }

  /// Immediate values delivered and not yet claimed by the user (for
  /// peer-max-queued-imms).
  virtual size_t queued_imms() const {
    return 0;
  }

  /// Receive buffers of the link whose messages are still held (by users
  /// through zero-copy chunks, and by the frame being handled):
  /// `link::receive_buffers_held`.  Beyond half of the pool, received
  /// chunks are copied out (`tuning::zero_copy_receive`).  The default: 0.
  virtual uint32_t receive_buffers_held() const {
    return 0;
  }

  /// Hands a region of ours back to the user (the peer's SendMR REMOTE).
  virtual void deliver_local_mr(local_mr mr) = 0;

  /// Hands a token of the peer's memory lent to us (SendMR LOCAL).
  virtual void deliver_remote_mr(const mr_token& token) = 0;

  /// The same as `deliver_local_mr` with the sender's application tag
  /// (0: none).  The default drops the tag.
  virtual void deliver_tagged_local_mr(local_mr mr, uint64_t tag) {
    static_cast<void>(tag);
    deliver_local_mr(std::move(mr));
  }

  /// The same as `deliver_remote_mr` with the sender's application tag
  /// (0: none) and lease (milliseconds from now; 0: none).  The default
  /// drops both.
  virtual void deliver_tagged_remote_mr(const mr_token& token, uint64_t tag,
                                        uint32_t lease_ms) {
    static_cast<void>(tag);
    static_cast<void>(lease_ms);
    deliver_remote_mr(token);
  }

  /// Ends the connection because of `reason` (the peer violated the
  /// protocol); the owner later calls `close`.  May be called more than
  /// once.
  virtual void disconnect(const caf::error& reason) = 0;

  /// Asks for `flush_acks` after the inbound frames queued now were
  /// handled; called at most once until that flush.
  virtual void schedule_ack_flush() = 0;

  /// Asks for `expire(now)` within the sweep interval: a request now
  /// waits for an answer.  May be called while one is already due.
  virtual void schedule_sweep() = 0;

  /// Bytes of delivered data chunks not yet claimed by the user (for the
  /// peer-max-queued-bytes quota).
  virtual uint64_t queued_data_bytes() const = 0;

  /// Tokens delivered by `deliver_remote_mr` not yet claimed by the user
  /// (for the peer-max-queued-mrs quota).
  virtual size_t queued_remote_mrs() const = 0;

  /// Reads the peer's memory `src` into `dst` (same length) with RDMA
  /// READ, for a rendezvous SendData, and calls `done` once with the
  /// outcome (an empty error on success), on the owner's thread.  `dst`
  /// stays alive until then.  When the connection goes, `done` gets the
  /// failure or is never called (the owner and the core are gone).  The
  /// default fails at once with `unsupported` (a sink without reads:
  /// the core then never offers rendezvous, see `set_reads`).
  virtual void read(local_mr dst, const mr_token& src,
                    std::function<void(const caf::error&)> done);

  /// Takes one ActorMessage frame (remote actors) with its `len` payload
  /// bytes at `data` (valid during the call only).  Returns an error when
  /// the frame violates the protocol (the core counts a violation).  The
  /// default refuses every frame.
  virtual caf::error deliver_actor_message(const protocol::ActorMessage& m,
                                           const uint8_t* data, size_t len);

  /// The chunked actor message of the peer being reassembled: whether
  /// one is (one being discarded holds nothing and does not count) and
  /// the bytes it holds (counted against peer-max-queued-bytes).
  struct partial_actor_state {
    bool active = false;
    uint64_t bytes = 0;
  };

  /// Returns the state of the peer's chunked actor message being
  /// reassembled.  The default has none.
  virtual partial_actor_state partial_actor() const {
    return {};
  }

  /// Drops the peer's chunked actor message being reassembled because of
  /// `why` (over peer-max-queued-bytes, past peer-partial-timeout-ms):
  /// frees its bytes, answers a request among it with `why` and drops
  /// its remaining chunks as they come.  The default does nothing.
  virtual void drop_partial_actor(const caf::error& why) {
    static_cast<void>(why);
  }

  /// Refuses the peer's rendezvous actor message `m` (whole, `m.len()`
  /// bytes, not delivered) because of `why`: the sink counts it for the
  /// peer's credit like a delivered one and fails a request among it to
  /// its sender (the error travels back as the answer).  Called in the
  /// message's place in the order.  The default does nothing.
  virtual void refuse_actor_message(const protocol::ActorMessage& m,
                                    const caf::error& why) {
    static_cast<void>(m);
    static_cast<void>(why);
  }

  /// Finds the actor published under `name` for the peer's ActorLookup
  /// (id 0: none).  The default finds nothing.
  virtual actor_lookup_result find_actor(const std::string& name);

  /// The peer's Hello arrived and offers remote actors: `flow` says
  /// whether it also offers EXT_ACTOR_FLOW (then `window_messages` and
  /// `window_bytes` are the window it announced, at least 1 each).
  /// Called once, before any actor frame of the peer is delivered.  The
  /// default ignores it.
  virtual void actor_flow(bool flow, uint64_t window_messages,
                          uint64_t window_bytes) {
    static_cast<void>(flow);
    static_cast<void>(window_messages);
    static_cast<void>(window_bytes);
  }

  /// Takes the peer's ActorAck (cumulative counts).  Returns an error
  /// when it acks more than was sent or less than before (the core
  /// counts a violation).  The default refuses it.
  virtual caf::error take_actor_ack(uint64_t messages, uint64_t bytes);
};

} // namespace rdmactor
