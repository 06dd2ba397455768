#pragma once

// Internal: an actor activation that can end early.  Not installed.

#include <cstddef>

#include <caf/resumable.hpp>

namespace rdmactor {

/// Runs one activation of an actor one message at a time: calls
/// `resume_one()` (the actor's own `resume(ctx, 1)`) up to `max_throughput`
/// times and returns the first result other than `resume_later` (the
/// mailbox ran dry and is blocked, or the actor ended), or `resume_later`
/// once `should_yield()` holds after a message, or after `max_throughput`
/// messages.  `should_yield` is asked only after a `resume_later`, while
/// the actor is still the caller's to run: after `awaiting_message` another
/// worker may already run it, after `done` its state is gone.
///
/// Called by the actor's `resume` override on the CAF worker that runs it.
template <class ResumeOne, class ShouldYield>
caf::resumable::resume_result run_activation(size_t max_throughput,
                                             ResumeOne&& resume_one,
                                             ShouldYield&& should_yield) {
  for (size_t i = 0; i < max_throughput; ++i) {
    auto result = resume_one();
    if (result != caf::resumable::resume_later)
      return result;
    if (should_yield())
      break;
  }
  return caf::resumable::resume_later;
}

} // namespace rdmactor
