#include "protocol/frame_scratch.hpp"

#include <google/protobuf/arena.h>

namespace rdmactor::protocol {

/// The arena of this thread, whether a scope holds it, and what lives on
/// it from scope to scope until the arena is reset.
struct scratch_arena {
  alignas(8) char block[frame_scratch::block_bytes];
  google::protobuf::Arena arena;
  bool taken = false;
  /// Every scope's message (null: none since the last reset).
  Message* msg = nullptr;
  /// The bodies the last scope's message held, released for the next
  /// eager frame (see `eager_spares`).
  eager_spares spares;

  /// Destroys everything on the arena but its first block.
  void reset() {
    arena.Reset();
    msg = nullptr;
    spares = eager_spares{};
  }

  scratch_arena() : arena(options(block)) {}

  static google::protobuf::ArenaOptions options(char* block) {
    google::protobuf::ArenaOptions opts;
    opts.initial_block = block;
    opts.initial_block_size = frame_scratch::block_bytes;
    return opts;
  }
};

namespace {

scratch_arena& this_thread_arena() {
  thread_local scratch_arena ta;
  return ta;
}

} // namespace

frame_scratch::frame_scratch() {
  auto& ta = this_thread_arena();
  if (ta.taken) {
    own_ = std::make_unique<Message>();
    msg_ = own_.get();
    return;
  }
  ta.taken = true;
  arena_ = &ta;
  if (ta.msg == nullptr) {
    ta.msg = google::protobuf::Arena::CreateMessage<Message>(&ta.arena);
  } else {
    if (ta.msg->body_case() == Message::kActorMessage) {
      ta.spares.actor_message = ta.msg->unsafe_arena_release_actor_message();
    } else if (ta.msg->body_case() == Message::kRequest) {
      auto* req = ta.msg->unsafe_arena_release_request();
      if (req->body_case() == Request::kSendData)
        ta.spares.send_data = req->unsafe_arena_release_send_data();
      ta.spares.request = req;
    }
    ta.msg->Clear();
  }
  msg_ = ta.msg;
}

frame_scratch::~frame_scratch() {
  if (arena_ == nullptr)
    return;
  // Destroys the messages on the arena and keeps the first block, when
  // the next frame might not fit or a message held much.
  if (reset_ || arena_->arena.SpaceUsed() > block_bytes / 2)
    arena_->reset();
  arena_->taken = false;
}

uint64_t frame_scratch::arena_bytes_used() {
  return this_thread_arena().arena.SpaceUsed();
}

decode_result frame_scratch::decode(const uint8_t* data, size_t len,
                                    size_t max_message_len, bool allow_more) {
  auto res = protocol::decode(data, len, max_message_len, *msg_, allow_more,
                              arena_ != nullptr ? &arena_->spares : nullptr);
  // On an error the message may hold part of a frame of any length.
  if (res.code != errc::none
      || res.frame_len - res.payload_len > keep_message_bytes)
    reset_ = true;
  return res;
}

} // namespace rdmactor::protocol
