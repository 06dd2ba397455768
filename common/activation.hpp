#pragma once

// Internal: an actor activation that can end early.  Not installed.

#include <cstddef>

#include <caf/config.hpp>
#include <caf/logger.hpp>
#include <caf/resumable.hpp>

namespace rdmactor {

/// Detaches the calling thread from CAF's logger, once per thread, where
/// libcaf logs nothing (built with CAF_LOG_LEVEL quiet, as Debian's package
/// is).  CAF still tags each `resume` and each worker turn with the actor's
/// id for its logger (`CAF_PUSH_AID`): two calls of
/// `logger::thread_local_aid` each, a mutex and a hash-map look-up, about
/// 7 k instructions per send round trip (callgrind, docs/benchmarks.md).
/// Without a current logger CAF skips the tagging.  A CAF worker sets its
/// logger once, when it starts (`worker::run`), so this lasts; a thread
/// hook cannot do it (it runs before `worker::run`).  rdmactor's own log
/// (spdlog) is not affected.
inline void detach_caf_logger() noexcept {
#if CAF_LOG_LEVEL == CAF_LOG_LEVEL_QUIET
  thread_local bool detached = false;
  if (!detached) {
    detached = true;
    caf::logger::set_current_actor_system(nullptr);
  }
#endif
}

/// Runs one activation of an actor one message at a time: calls
/// `resume_one()` (the actor's own `resume(ctx, 1)`) up to `max_throughput`
/// times and returns the first result other than `resume_later` (the
/// mailbox ran dry and is blocked, or the actor ended), or `resume_later`
/// once `should_yield()` holds after a message, or after `max_throughput`
/// messages.  `should_yield` is asked only after a `resume_later`, while
/// the actor is still the caller's to run: after `awaiting_message` another
/// worker may already run it, after `done` its state is gone.
///
/// Called by the actor's `resume` override on the CAF worker that runs it;
/// detaches that worker from CAF's logger (`detach_caf_logger`).
template <class ResumeOne, class ShouldYield>
caf::resumable::resume_result run_activation(size_t max_throughput,
                                             ResumeOne&& resume_one,
                                             ShouldYield&& should_yield) {
  detach_caf_logger();
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
