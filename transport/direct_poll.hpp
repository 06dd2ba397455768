#pragma once

// Polls without messages, for an actor that drives a link (the transport
// actor, the agent).  Not installed.

#include <atomic>

#include <caf/actor_cast.hpp>
#include <caf/resumable.hpp>
#include <caf/send.hpp>

#include "rdmactor/transport/atoms.hpp"

namespace rdmactor::transport {

/// What an actor's `resume` keeps for work without messages: polls, and a
/// tail (the agent's held acknowledgement flush).  Members of the actor,
/// not of its state: after `awaiting_message` the state may be gone (CAF
/// destroys it when the actor exits on another worker), the actor not (the
/// worker holds a reference while it runs `resume`).
struct direct_poll {
  /// A poll is wanted (`link_driver::schedule_poll`).
  std::atomic<bool> wanted{false};
  /// The tail is wanted: work that runs after one trip through the
  /// worker's queue, when the mailbox is empty or once the messages that
  /// waited then ran.  Set by the owner during an activation.
  std::atomic<bool> tail{false};
  /// The last activation was a poll without a message.
  bool polled_last = false;
  /// The wanted tail waited through one activation of messages.
  bool tail_waited = false;
};

/// One activation of an actor that polls: a wanted poll runs here, not as
/// a message (a message and its dispatch cost about twice the poll itself;
/// docs/benchmarks.md, "Polls without messages"), when nothing else waits
/// for the actor or when its last activation ran messages: under a stream
/// of messages, polls and messages take turns, so the stream cannot hold
/// the poll (and the credits it reaps) off.  A wanted tail runs here too,
/// before the poll, never in the activation that asked for it: the actor
/// goes through the worker's queue first (the actors it handed messages
/// to run before it), then the tail runs when the mailbox is empty, or
/// after the messages that waited in it (answers that may make the tail
/// moot) ran once.
///
/// The rule that keeps this safe: CAF resumes an actor only while it is
/// scheduled, and `resume` returning `awaiting_message` gives that up (the
/// mailbox is blocked; the next message schedules it again, maybe on
/// another worker).  So wanted work either keeps the actor scheduled
/// (`resume_later`, after taking back a mailbox that nobody wrote to since
/// it was blocked) or becomes a message to `Handle` when someone did:
/// `poll_atom` for a poll, `TailAtom` for the tail.
///
/// `alive`: the actor has not terminated.  `side_work(poll, tail)` runs
/// the tail (if `tail`), then the poll (if `poll`); the caller sets CAF's
/// context first: it is outside any handler.  `run_messages()` runs the
/// actor's messages (`run_activation`).  Called by the actor's `resume` on
/// the CAF worker that runs it.
template <class Handle, class TailAtom = poll_atom, class Actor, class SideWork,
          class RunMessages>
caf::resumable::resume_result
resume_with_polls(Actor* self, direct_poll& dp, bool alive,
                  SideWork&& side_work, RunMessages&& run_messages) {
  if (alive) {
    bool idle = self->mailbox().empty();
    bool tail = dp.tail.load(std::memory_order_relaxed)
                && (idle || dp.tail_waited) && dp.tail.exchange(false);
    bool poll = (!dp.polled_last || idle) && dp.wanted.exchange(false);
    if (tail || poll) {
      if (tail)
        dp.tail_waited = false;
      dp.polled_last = poll;
      side_work(poll, tail);
      if (poll && dp.wanted.load(std::memory_order_relaxed))
        return caf::resumable::resume_later;
      // A tail the work just asked for takes its trip first.
      if (dp.tail.load(std::memory_order_relaxed) && self->mailbox().empty())
        return caf::resumable::resume_later;
    }
    if (dp.tail.load(std::memory_order_relaxed))
      dp.tail_waited = true;
  }
  dp.polled_last = false;
  auto result = run_messages();
  // From here on only the flags and the mailbox: after awaiting_message
  // another worker may run this actor.
  if (result != caf::resumable::awaiting_message)
    return result;
  bool poll = dp.wanted.exchange(false);
  bool tail = dp.tail.exchange(false);
  if (!poll && !tail)
    return result;
  if (self->mailbox().try_unblock()) {
    // Nobody wrote to the mailbox since CAF blocked it: still ours.
    if (tail && !poll && dp.tail_waited) {
      // The tail waited through these messages: it runs now, not after
      // one more trip through the queue (an activation, about 1.5 k
      // instructions with CAF's worker).
      dp.tail_waited = false;
      side_work(false, true);
      if (!dp.wanted.load(std::memory_order_relaxed)
          && !dp.tail.load(std::memory_order_relaxed)
          && self->mailbox().try_block())
        return caf::resumable::awaiting_message;
      return caf::resumable::resume_later;
    }
    if (poll)
      dp.wanted.store(true, std::memory_order_relaxed);
    if (tail)
      dp.tail.store(true, std::memory_order_relaxed);
    return caf::resumable::resume_later;
  }
  // A message came and scheduled us again: the work goes behind it.
  auto hdl = caf::actor_cast<Handle>(self);
  if (poll)
    caf::anon_send(hdl, poll_atom::value);
  if (tail)
    caf::anon_send(hdl, TailAtom::value);
  return result;
}

} // namespace rdmactor::transport
