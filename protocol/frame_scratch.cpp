#include "protocol/frame_scratch.hpp"

#include <google/protobuf/arena.h>

namespace rdmactor::protocol {

namespace {

/// The arena of this thread and whether a scope holds it.
struct thread_arena {
  alignas(8) char block[frame_scratch::block_bytes];
  google::protobuf::Arena arena;
  bool taken = false;

  thread_arena() : arena(options(block)) {}

  static google::protobuf::ArenaOptions options(char* block) {
    google::protobuf::ArenaOptions opts;
    opts.initial_block = block;
    opts.initial_block_size = frame_scratch::block_bytes;
    return opts;
  }
};

thread_arena& this_thread_arena() {
  thread_local thread_arena ta;
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
  on_arena_ = true;
  msg_ = google::protobuf::Arena::CreateMessage<Message>(&ta.arena);
}

frame_scratch::~frame_scratch() {
  if (!on_arena_)
    return;
  auto& ta = this_thread_arena();
  // Destroys the messages on the arena and keeps the first block, when
  // the next frame might not fit or a message held much.
  if (reset_ || ta.arena.SpaceUsed() > block_bytes / 2)
    ta.arena.Reset();
  ta.taken = false;
}

uint64_t frame_scratch::arena_bytes_used() {
  return this_thread_arena().arena.SpaceUsed();
}

decode_result frame_scratch::decode(const uint8_t* data, size_t len,
                                    size_t max_message_len, bool allow_more) {
  auto res = protocol::decode(data, len, max_message_len, *msg_, allow_more);
  // On an error the message may hold part of a frame of any length.
  if (res.code != errc::none
      || res.frame_len - res.payload_len > keep_message_bytes)
    reset_ = true;
  return res;
}

} // namespace rdmactor::protocol
