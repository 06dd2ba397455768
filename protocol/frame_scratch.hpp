#pragma once

// A Message without heap allocations, to decode an inbound frame into or
// to build an outbound one: a protobuf arena per thread over a fixed
// block, reset when the scope ends.

#include <memory>

#include "protocol/agent.pb.h"

namespace rdmactor::protocol {

/// A `Message` to decode one frame into (or build one in), valid while this
/// object lives.
///
/// The message lives on a per-thread protobuf arena whose first block (4
/// KiB, `frame_scratch::block_bytes`) is reused frame after frame: a frame
/// whose decoded form fits in it costs no heap allocation (a SendData, an
/// ActorMessage's header, a Response); a larger one takes more blocks,
/// freed when the scope ends.  A scope opened while another is open on the
/// same thread (not expected: a frame is handled before the next is
/// decoded) gets a message of its own on the heap.  Not copyable; create
/// and destroy it on one thread.
class frame_scratch {
public:
  /// The arena's reused first block, in bytes.
  static constexpr size_t block_bytes = 4096;

  frame_scratch();
  ~frame_scratch();

  frame_scratch(const frame_scratch&) = delete;
  frame_scratch& operator=(const frame_scratch&) = delete;

  /// The empty message to decode into.
  Message& message() noexcept {
    return *msg_;
  }

private:
  Message* msg_ = nullptr;
  /// Set when the thread's arena was taken: the message lives on it.
  bool on_arena_ = false;
  /// The message of a nested scope.
  std::unique_ptr<Message> own_;
};

} // namespace rdmactor::protocol
