#include "rdmactor/remote_mr.hpp"

#include <chrono>
#include <string>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include "rdmactor/atoms.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor {

remote_mr_state::~remote_mr_state() {
  if (done_.load())
    return;
  // A lease that ended: the owner revoked the region by itself.
  if (lease_ended_at(std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count()))
    return;
  // The agent may be gone (peer disconnected): then there is nothing to
  // release, the peer freed everything it allocated for us.
  if (auto agent = caf::actor_cast<caf::actor>(agent_))
    caf::anon_send(agent, release_atom::value, token_);
}

caf::expected<remote_mr> remote_mr::slice(uint64_t offset,
                                          uint64_t length) const {
  if (!state_ || offset > length_ || length > length_ - offset)
    return make_error(errc::out_of_bounds, "slice [" + std::to_string(offset)
                                               + ", +" + std::to_string(length)
                                               + ") of a "
                                               + std::to_string(length_)
                                               + "-byte remote memory region");
  remote_mr out = *this;
  out.offset_ = offset_ + offset;
  out.length_ = length;
  return out;
}

} // namespace rdmactor
