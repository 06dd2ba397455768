#include "actors/remote/actor_flow.hpp"

#include <algorithm>
#include <string>

#include "rdmactor/error.hpp"

namespace rdmactor {

bool actor_window_allows(uint64_t in_messages, uint64_t in_bytes, uint64_t size,
                         uint64_t window_messages,
                         uint64_t window_bytes) noexcept {
  if (in_messages >= window_messages)
    return false;
  if (in_bytes == 0 || in_bytes < window_bytes / 2)
    return true;
  return size <= window_bytes && in_bytes <= window_bytes - size;
}

caf::error actor_outflow::ack(uint64_t messages, uint64_t bytes) {
  if (messages > sent_messages || bytes > sent_bytes)
    return make_error(errc::malformed_message,
                      "an ActorAck acknowledges " + std::to_string(messages)
                          + " actor messages (" + std::to_string(bytes)
                          + " bytes) but only " + std::to_string(sent_messages)
                          + " (" + std::to_string(sent_bytes)
                          + " bytes) were sent");
  if (messages < acked_messages || bytes < acked_bytes)
    return make_error(errc::malformed_message,
                      "an ActorAck acknowledges less than an earlier one");
  acked_messages = messages;
  acked_bytes = bytes;
  return caf::none;
}

actor_inflow::actor_inflow(uint64_t window_messages, uint64_t window_bytes)
    : window_messages_(std::max<uint64_t>(1, window_messages)),
      window_bytes_(std::max<uint64_t>(1, window_bytes)) {}

void actor_inflow::set_wakeup(std::function<void()> fn) {
  std::lock_guard<std::mutex> guard{mtx_};
  wakeup_ = std::move(fn);
}

void actor_inflow::set_flow(bool on) {
  std::lock_guard<std::mutex> guard{mtx_};
  flow_ = on;
}

caf::error actor_inflow::admit(uint64_t bytes) {
  std::lock_guard<std::mutex> guard{mtx_};
  // With flow control the sender keeps to what we acknowledged; without,
  // to what still waits in mailboxes.
  auto base_m = flow_ ? acked_messages_ : consumed_messages_;
  auto base_b = flow_ ? acked_bytes_ : consumed_bytes_;
  if (!actor_window_allows(received_messages_ - base_m,
                           received_bytes_ - base_b, bytes, window_messages_,
                           window_bytes_))
    return make_error(errc::quota_exceeded,
                      "the peer sent more actor messages than our window ("
                          + std::to_string(window_messages_) + " messages, "
                          + std::to_string(window_bytes_)
                          + " bytes; actor-window-messages, "
                            "actor-window-bytes) without waiting for credit");
  ++received_messages_;
  received_bytes_ += bytes;
  buffered_max_
      = std::max(buffered_max_, received_messages_ - consumed_messages_);
  return caf::none;
}

void actor_inflow::consumed(uint64_t bytes) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    ++consumed_messages_;
    consumed_bytes_ += bytes;
    if (!flow_ || wake_pending_ || !wakeup_)
      return;
    auto due_m = consumed_messages_ - acked_messages_;
    auto due_b = consumed_bytes_ - acked_bytes_;
    if (due_m < std::max<uint64_t>(1, window_messages_ / 2)
        && due_b < std::max<uint64_t>(1, window_bytes_ / 2))
      return;
    wake_pending_ = true;
    wake = wakeup_;
  }
  wake();
}

bool actor_inflow::take_ack(uint64_t& messages, uint64_t& bytes) {
  std::lock_guard<std::mutex> guard{mtx_};
  wake_pending_ = false;
  if (!flow_ || consumed_messages_ == acked_messages_)
    return false;
  acked_messages_ = consumed_messages_;
  acked_bytes_ = consumed_bytes_;
  messages = acked_messages_;
  bytes = acked_bytes_;
  ++acks_;
  return true;
}

uint64_t actor_inflow::buffered() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return received_messages_ - consumed_messages_;
}

uint64_t actor_inflow::buffered_max() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return buffered_max_;
}

uint64_t actor_inflow::acks() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return acks_;
}

} // namespace rdmactor
