#pragma once

// Polls without messages, for an actor that drives a link (the transport
// actor, the agent).  Not installed.

#include <atomic>

#include <caf/actor_cast.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>
#include <caf/send.hpp>

#include "rdmactor/detail/transport_atoms.hpp"

namespace rdmactor::transport {

/// What an actor's `resume` keeps for work without messages: polls, the
/// CQ's notification, and a tail (the agent's held acknowledgement
/// flush).  Members of the actor, not of its state: after
/// `awaiting_message` the state may be gone (CAF destroys it when the
/// actor exits on another worker), the actor not (the worker holds a
/// reference while it runs `resume`).
struct direct_poll {
  /// A poll is wanted (`link_driver::schedule_poll`).
  std::atomic<bool> wanted{false};
  /// The armed notification fired (`wake_without_message`, on the
  /// fabric's thread): `link_driver::notified` is due.
  std::atomic<bool> notified{false};
  /// The tail is wanted: work that runs after one trip through the
  /// worker's queue, when the mailbox is empty or once the messages that
  /// waited then ran.  Set by the owner during an activation.
  std::atomic<bool> tail{false};
  /// The last activation was a poll without a message.
  bool polled_last = false;
  /// The wanted tail waited through one activation of messages.
  bool tail_waited = false;
};

/// The work one call of `side_work` is to do, in this order.
struct due_work {
  bool tail = false;
  bool notified = false;
  bool poll = false;
};

/// Tells `self` that its CQ's notification fired, without a message: sets
/// the flag and, if `self` is idle (its mailbox blocked), schedules it as
/// its `enqueue` would for a message (`Actor` is a `with_scheduler_job`,
/// include/rdmactor/scheduler_job.hpp).  Otherwise it runs or is scheduled already,
/// and its `resume` sees the flag (see `resume_with_polls`).  Called on the
/// fabric's thread while the caller holds a strong reference to `self`.
template <class Actor>
void wake_without_message(Actor* self, direct_poll& dp) noexcept {
  dp.notified.store(true);
  if (self->mailbox().try_unblock())
    self->schedule_job(nullptr); // ours to schedule (with_scheduler_job)
}

/// One activation of an actor that polls: a wanted poll (or a fired
/// notification) runs here, not as a message (a message and its dispatch
/// cost about twice the poll itself; docs/benchmarks.md, "Polls without
/// messages"), when nothing else waits for the actor or when its last
/// activation ran messages: under a stream of messages, polls and messages
/// take turns, so the stream cannot hold the poll (and the credits it
/// reaps) off.  A wanted tail runs here too, before the poll, never in the
/// activation that asked for it: the actor goes through the worker's queue
/// first (the actors it handed messages to run before it), then the tail
/// runs when the mailbox is empty, or after the messages that waited in it
/// (answers that may make the tail moot) ran once.
///
/// The rule that keeps this safe: CAF resumes an actor only while it is
/// scheduled, and `resume` returning `awaiting_message` gives that up (the
/// mailbox is blocked; the next message, or `wake_without_message`,
/// schedules it again, maybe on another worker).  So wanted work either
/// keeps the actor scheduled (`resume_later`, after taking back a mailbox
/// that nobody unblocked since it was blocked) or becomes a message to
/// `Handle` when someone did: `poll_atom` for a poll, `cq_event_atom` for
/// a notification, `TailAtom` for the tail.
///
/// `alive`: the actor has not terminated.  `side_work(const due_work&)`
/// runs the work; the caller sets CAF's context first: it is outside any
/// handler.  `run_messages()` runs the actor's messages
/// (`run_activation`).  Called by the actor's `resume` on the CAF worker
/// that runs it.
template <class Handle, class TailAtom = poll_atom, class Actor, class SideWork,
          class RunMessages>
caf::resumable::resume_result
resume_with_polls(Actor* self, direct_poll& dp, bool alive,
                  SideWork&& side_work, RunMessages&& run_messages) {
  if (alive) {
    bool idle = self->mailbox().empty();
    // Asked for in an earlier activation: it made its trip through the
    // queue to get here.
    bool tail_pending = dp.tail.load(std::memory_order_relaxed);
    due_work w;
    w.tail
        = tail_pending && (idle || dp.tail_waited) && dp.tail.exchange(false);
    bool may_poll = !dp.polled_last || idle;
    w.notified = may_poll && dp.notified.exchange(false);
    w.poll = may_poll && dp.wanted.exchange(false);
    bool polls = w.notified || w.poll;
    if (w.tail || polls) {
      if (w.tail)
        dp.tail_waited = false;
      dp.polled_last = polls;
      side_work(w);
      if (polls
          && (dp.wanted.load(std::memory_order_relaxed)
              || dp.notified.load(std::memory_order_relaxed)))
        return caf::resumable::resume_later;
      // A tail the work just asked for takes its trip first.
      if (dp.tail.load(std::memory_order_relaxed) && self->mailbox().empty())
        return caf::resumable::resume_later;
    }
    // The tail that made its trip waits for these messages only (one the
    // work above just asked for has its trip still to make).
    if (tail_pending && !w.tail)
      dp.tail_waited = true;
    else if (!tail_pending)
      dp.tail_waited = false; // a tail sent as a message left it behind
  }
  dp.polled_last = false;
  auto result = run_messages();
  // From here on only the flags and the mailbox while it is blocked:
  // after awaiting_message another worker may run this actor.
  for (;;) {
    if (result != caf::resumable::awaiting_message)
      return result;
    bool poll = dp.wanted.exchange(false);
    bool notified = dp.notified.exchange(false);
    bool tail = dp.tail.exchange(false);
    if (!poll && !notified && !tail)
      return result;
    if (!self->mailbox().try_unblock()) {
      // A message (or a wake) came and scheduled us again: the work goes
      // behind it.
      auto hdl = caf::actor_cast<Handle>(self);
      if (poll)
        caf::anon_send(hdl, poll_atom::value);
      if (notified)
        caf::anon_send(hdl, cq_event_atom::value);
      if (tail)
        caf::anon_send(hdl, TailAtom::value);
      return result;
    }
    // Nobody unblocked the mailbox since it was blocked: still ours.
    if (tail && !poll && !notified && dp.tail_waited) {
      // The tail waited through these messages: it runs now, not after
      // one more trip through the queue (an activation, about 1.5 k
      // instructions with CAF's worker).  Then block again, and look at
      // the flags once more, as after CAF's own blocking above.
      dp.tail_waited = false;
      due_work w;
      w.tail = true;
      side_work(w);
      if (!self->mailbox().try_block())
        return caf::resumable::resume_later;
      continue;
    }
    if (poll)
      dp.wanted.store(true);
    if (notified)
      dp.notified.store(true);
    if (tail)
      dp.tail.store(true);
    return caf::resumable::resume_later;
  }
}

} // namespace rdmactor::transport
