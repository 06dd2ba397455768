// The budget and the deadlines of a peer's partial work: the rendezvous
// READs of the peer's memory in flight (data and actor messages) and the
// chunked actor message being reassembled (its deadline is the actor
// channel's, actors/core/actor_channel.cpp; the sink holds its bytes).  Each
// counts against peer-max-queued-bytes while it lasts and has
// peer-partial-timeout-ms from its start to finish; frames on other
// business do not move that deadline.  The owner's sweep (`expire`)
// enforces it, no timer per partial.

#include "actors/core/agent_core.hpp"

#include <algorithm>

#include "common/logging.hpp"

namespace rdmactor {

namespace {

std::chrono::milliseconds partial_timeout(const options& opts) {
  return std::chrono::milliseconds{opts.peer_partial_timeout_ms};
}

} // namespace

uint64_t agent_core::buffered_bytes() const {
  // What the peer sent and nobody claimed yet, what is being read, what
  // waits behind a READ and the chunked actor message being reassembled:
  // data and actor messages alike (each bounded, so the sum cannot wrap).
  return out_.queued_data_bytes() + data_.held_bytes() + actors_.held_bytes()
         + out_.partial_actor().bytes;
}

agent_core::time_point agent_core::partial_deadline() const noexcept {
  return now_ + partial_timeout(opts_);
}

/// Ends the partial work past its deadline at `now`; returns the earliest
/// deadline left (`time_point::max()`: none).
agent_core::time_point agent_core::expire_partials(time_point now) {
  auto next = time_point::max();
  if (closed_ || disconnected_)
    return next;
  // A READ that has not completed: its memory belongs to the READ, which
  // may still land, until the queue pair is gone; handing it back (or
  // reusing it) would let the peer write into memory someone else holds,
  // and forgetting it would let the peer pile up stalled READs past its
  // budget.  So the connection ends; its teardown flushes the READ.
  auto [data_next, data_stalled] = data_.read_deadlines(now);
  auto [actor_next, actor_stalled] = actors_.read_deadlines(now);
  next = std::min({next, data_next, actor_next});
  if (data_stalled || actor_stalled) {
    ++counters_.partials_dropped;
    end_connection(
        make_error(errc::request_timeout,
                   "a rendezvous READ of the peer's memory did not complete "
                   "within peer-partial-timeout-ms="
                       + std::to_string(opts_.peer_partial_timeout_ms)
                       + "; the peer stalls it, or raise the option"),
        "a rendezvous READ of the peer's memory did not complete within "
        "peer-partial-timeout-ms");
    return time_point::max();
  }
  return std::min(next, actors_.expire_partial(now));
}

} // namespace rdmactor
