#pragma once

// Internal to remote actors: the messages a connection's proxies handed to
// its agent and the agent has not posted yet, in order, with their bytes
// in one buffer.  Not installed.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "rdmactor/local_mr.hpp"

namespace rdmactor {

/// Serialized actor messages on their way from proxies (any thread) to
/// the agent that posts them, in the order they were handed over.
///
/// A proxy appends under its connection's lock (`push`); the first message
/// into an empty outbox wakes the agent with one mailbox message, and the
/// agent then takes every message at once (`take`, under the same lock),
/// so a burst costs one wake-up instead of a mailbox element, a
/// `caf::message` and a byte vector per message.  Small messages' bytes
/// share one buffer; a large one comes in registered memory (`region`).
/// The agent keeps a second outbox and swaps it with this one, so neither
/// allocates once both have grown to the burst size.  Not thread-safe: the
/// owner's lock guards it.
class actor_outbox {
public:
  /// One message: its frame header's fields and where its bytes are.
  struct message {
    uint64_t target = 0;
    uint64_t sender = 0;
    uint64_t mid = 0;
    bool down = false;
    /// Its bytes in `bytes()`, unless in `region`.
    size_t offset = 0;
    size_t len = 0;
    local_mr region;
  };

  /// Buffer capacity kept between bursts; a larger one is freed by
  /// `clear` (a burst of large messages must not pin its memory).
  static constexpr size_t keep_bytes = size_t{1} << 20;

  /// Appends a message whose bytes are `data`/`len` (copied), or in
  /// `region` when it is valid.  Returns whether the outbox was empty:
  /// then the agent must be woken.
  bool push(uint64_t target, uint64_t sender, uint64_t mid, bool down,
            const char* data, size_t len, local_mr region = {});

  /// Moves every message to `into` (cleared first) and leaves this outbox
  /// empty with `into`'s former capacity.
  void take(actor_outbox& into);

  /// Drops every message (their regions return to their pool), keeping
  /// up to keep_bytes of capacity.
  void clear();

  bool empty() const noexcept {
    return messages_.empty();
  }

  size_t size() const noexcept {
    return messages_.size();
  }

  /// The messages, oldest first (the agent moves their regions out).
  std::vector<message>& messages() noexcept {
    return messages_;
  }

  /// The bytes of a message without a region.
  const char* data(const message& m) const noexcept {
    return bytes_.data() + m.offset;
  }

  /// Bytes buffered for messages without a region.
  size_t bytes() const noexcept {
    return bytes_.size();
  }

  /// Bytes the buffer has room for without growing.
  size_t capacity() const noexcept {
    return bytes_.capacity();
  }

private:
  std::vector<message> messages_;
  std::vector<char> bytes_;
};

} // namespace rdmactor
