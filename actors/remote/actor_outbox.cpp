#include "actors/remote/actor_outbox.hpp"

#include <utility>

namespace rdmactor {

bool actor_outbox::push(uint64_t target, uint64_t sender, uint64_t mid,
                        bool down, const char* data, size_t len,
                        local_mr region) {
  bool was_empty = messages_.empty();
  message m;
  m.target = target;
  m.sender = sender;
  m.mid = mid;
  m.down = down;
  if (region.valid()) {
    m.len = region.size();
    m.region = std::move(region);
  } else {
    m.offset = bytes_.size();
    m.len = len;
    bytes_.insert(bytes_.end(), data, data + len);
  }
  messages_.push_back(std::move(m));
  return was_empty;
}

void actor_outbox::take(actor_outbox& into) {
  into.clear();
  messages_.swap(into.messages_);
  bytes_.swap(into.bytes_);
}

void actor_outbox::clear() {
  messages_.clear();
  bytes_.clear();
  if (bytes_.capacity() > keep_bytes)
    std::vector<char>{}.swap(bytes_);
  if (messages_.capacity() * sizeof(message) > keep_bytes)
    std::vector<message>{}.swap(messages_);
}

} // namespace rdmactor
