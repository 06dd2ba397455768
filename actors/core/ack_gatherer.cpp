// The acknowledgements of the peer's SendData that this node owes.

#include "actors/core/ack_gatherer.hpp"

#include <algorithm>

#include "common/tuning.hpp"
#include "protocol/codec.hpp"

namespace rdmactor {

ack_gatherer::step ack_gatherer::add(uint64_t id) {
  ids_.push_back(id);
  if (ids_.size() >= tuning::max_acks_per_response)
    return step::flush_now;
  if (scheduled_)
    return step::none;
  scheduled_ = true;
  return step::schedule_flush;
}

void ack_gatherer::clear() noexcept {
  scheduled_ = false;
  ids_.clear();
}

size_t ack_gatherer::fit(size_t room) const noexcept {
  if (ids_.empty() || room < protocol::piggyback_ack_overhead(1))
    return 0;
  auto fit = (room - protocol::piggyback_ack_overhead(0)) / sizeof(uint64_t);
  return std::min({ids_.size(), fit, tuning::max_acks_per_response});
}

void ack_gatherer::attached(size_t n) {
  n = std::min(n, ids_.size());
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<ptrdiff_t>(n));
}

} // namespace rdmactor
