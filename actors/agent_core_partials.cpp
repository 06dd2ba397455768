// The budget and the deadlines of a peer's partial work: the chunked actor
// message being reassembled (the sink holds its bytes) and the rendezvous
// READs of the peer's memory in flight.  Each counts against
// peer-max-queued-bytes while it lasts and has peer-partial-timeout-ms from
// its start to finish; frames on other business do not move that deadline.
// The owner's sweep (`expire`) enforces it, no timer per partial.

#include "actors/agent_core.hpp"

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
  return out_.queued_data_bytes() + inbound_.bytes() + actor_inbound_.bytes()
         + out_.partial_actor().bytes;
}

agent_core::time_point agent_core::partial_deadline() const noexcept {
  return now_ + partial_timeout(opts_);
}

/// Called after each actor frame the sink took: notes when a chunked
/// message starts (its deadline runs from there) and drops one that
/// outgrew the peer's budget.
void agent_core::track_partial_actor() {
  auto p = out_.partial_actor();
  if (!p.active) {
    actor_partial_ = false;
    return;
  }
  if (!actor_partial_) {
    actor_partial_ = true;
    actor_partial_since_ = now_;
    out_.schedule_sweep();
  }
  auto held = buffered_bytes();
  if (held <= opts_.peer_max_queued_bytes)
    return;
  actor_partial_ = false;
  ++counters_.partials_dropped;
  ++counters_.protocol_errors;
  auto why = make_error(
      errc::quota_exceeded,
      "the receiver holds " + std::to_string(held)
          + " bytes for this peer with the actor message being reassembled, "
            "over its peer-max-queued-bytes="
          + std::to_string(opts_.peer_max_queued_bytes)
          + "; send smaller messages or raise it there");
  out_.drop_partial_actor(why);
  if (auto v = may_log(spdlog::level::warn))
    log().warn("agent {}: dropped a chunked actor message over "
               "peer-max-queued-bytes{}",
               link_.peer, suppressed_note(v.denied_before));
  count_violation();
}

/// Ends the partial work past its deadline at `now`; returns the earliest
/// deadline left (`time_point::max()`: none).
agent_core::time_point agent_core::expire_partials(time_point now) {
  auto next = time_point::max();
  if (closed_ || disconnected_)
    return next;
  auto timeout = partial_timeout(opts_);
  // A READ that has not completed: its memory belongs to the READ, which
  // may still land, until the queue pair is gone; handing it back (or
  // reusing it) would let the peer write into memory someone else holds,
  // and forgetting it would let the peer pile up stalled READs past its
  // budget.  So the connection ends; its teardown flushes the READ.
  auto [data_next, data_stalled] = inbound_.deadlines(now);
  auto [actor_next, actor_stalled] = actor_inbound_.deadlines(now);
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
  if (actor_partial_) {
    if (!out_.partial_actor().active) {
      actor_partial_ = false;
    } else if (actor_partial_since_ + timeout <= now) {
      actor_partial_ = false;
      ++counters_.partials_dropped;
      ++counters_.protocol_errors;
      out_.drop_partial_actor(make_error(
          errc::request_timeout,
          "the rest of the chunked actor message did not arrive within the "
          "receiver's peer-partial-timeout-ms="
              + std::to_string(opts_.peer_partial_timeout_ms)
              + " of its first chunk; send it faster or raise the option "
                "there"));
      if (auto v = may_log(spdlog::level::warn))
        log().warn("agent {}: dropped a chunked actor message unfinished "
                   "after peer-partial-timeout-ms={}{}",
                   link_.peer, opts_.peer_partial_timeout_ms,
                   suppressed_note(v.denied_before));
      count_violation();
    } else {
      next = std::min(next, actor_partial_since_ + timeout);
    }
  }
  return next;
}

} // namespace rdmactor
