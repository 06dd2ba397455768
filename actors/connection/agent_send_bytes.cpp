// The agent: send_data of bytes the caller passes by value (a vector of
// std::byte or char, a string): copied into pool memory and sent in the
// same request, so an actor sends a few bytes in one request instead of
// two (alloc_local_mr, then send_data).

#include <algorithm>
#include <cstring>

#include "actors/connection/agent_state.hpp"

namespace rdmactor::agent_detail {

caf::result<uint64_t> send_bytes(self_ptr self, const void* data, size_t size,
                                 std::optional<uint32_t> imm) {
  // Read by the local device only (the gather list of a SEND): no remote
  // rights, so no peer's rkey ever reaches this memory.  Not zeroed: every
  // byte is overwritten at once.
  auto mr = self->state.core->pool()->allocate(
      std::max<size_t>(size, 1), 8, transport::access::local_write, false);
  if (!mr)
    return std::move(mr.error());
  if (size > 0)
    std::memcpy(mr->data(), data, size);
  local_mr payload = std::move(*mr);
  if (size == 0) {
    auto empty = payload.slice(0, 0);
    if (!empty)
      return std::move(empty.error());
    payload = std::move(*empty);
  }
  if (imm)
    return send_data(self, std::move(payload), *imm);
  return send_data(self, std::move(payload));
}

} // namespace rdmactor::agent_detail
