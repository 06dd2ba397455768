#pragma once

// A Message without heap allocations, to decode an inbound frame into or
// to build an outbound one: a protobuf arena per thread over a fixed
// block, reset when the scope ends.

#include <memory>

#include "protocol/agent.pb.h"
#include "protocol/codec.hpp"

namespace rdmactor::protocol {

/// A thread's arena and what lives on it (frame_scratch.cpp).
struct scratch_arena;

/// A `Message` to decode one frame into (or build one in), valid while this
/// object lives.
///
/// The message lives on a per-thread protobuf arena whose first block (4
/// KiB, `frame_scratch::block_bytes`) is reused frame after frame: a frame
/// whose decoded form fits in it costs no heap allocation (a SendData, an
/// ActorMessage's header, a Response).  The Message object itself is kept
/// from scope to scope (cleared when a scope opens), and so are the bodies
/// of the last one (an ActorMessage, or a Request and its SendData), which
/// the next eager frame's `decode` takes instead of allocating others (see
/// `eager_spares`).  The arena is reset (every message
/// on it destroyed) when a scope ends with more than half of the first
/// block used, or after a frame decoded with `decode` whose message took
/// more than `keep_message_bytes` on the wire; otherwise the next scope
/// goes on where this one stopped (a reset costs several hundred
/// instructions, more than decoding a small frame).  So the next frame of
/// up to half a block always fits, and what the kept messages hold outside
/// the arena (a string's heap buffer) stays under `keep_message_bytes`
/// times the frames one block takes.  A larger frame takes more blocks,
/// freed when its scope ends.  A scope opened while another is open on the
/// same thread (not expected: a frame is handled before the next is
/// decoded) gets a message of its own on the heap.  Not copyable; create
/// and destroy it on one thread.
class frame_scratch {
public:
  /// The arena's reused first block, in bytes.
  static constexpr size_t block_bytes = 4096;

  /// A decoded message longer than this on the wire resets the arena when
  /// its scope ends.
  static constexpr size_t keep_message_bytes = 256;

  frame_scratch();
  ~frame_scratch();

  frame_scratch(const frame_scratch&) = delete;
  frame_scratch& operator=(const frame_scratch&) = delete;

  /// The empty message to decode into.
  Message& message() noexcept {
    return *msg_;
  }

  /// Decodes one frame into `message()` (`protocol::decode`) and notes how
  /// large its message was, for the reset rule.
  decode_result decode(const uint8_t* data, size_t len, size_t max_message_len,
                       bool allow_more = false);

  /// Returns the bytes this thread's arena holds now; for tests.
  static uint64_t arena_bytes_used();

private:
  Message* msg_ = nullptr;
  /// The thread's arena when this scope took it (the message lives on
  /// it), else null.
  scratch_arena* arena_ = nullptr;
  /// The message of a nested scope.
  std::unique_ptr<Message> own_;
  /// Set when the arena must be reset at the end of this scope.
  bool reset_ = false;
};

} // namespace rdmactor::protocol
