#pragma once

// Polls without messages, for an actor that drives a link (the transport
// actor, the agent).  Not installed.

#include <atomic>

#include <caf/actor_cast.hpp>
#include <caf/resumable.hpp>
#include <caf/send.hpp>

#include "rdmactor/transport/atoms.hpp"

namespace rdmactor::transport {

/// What an actor's `resume` keeps for polls without messages.  Members of
/// the actor, not of its state: after `awaiting_message` the state may be
/// gone (CAF destroys it when the actor exits on another worker), the actor
/// not (the worker holds a reference while it runs `resume`).
struct direct_poll {
  /// A poll is wanted (`link_driver::schedule_poll`).
  std::atomic<bool> wanted{false};
  /// The last activation was a poll without a message.
  bool polled_last = false;
};

/// One activation of an actor that polls: a wanted poll runs here, not as
/// a message (a message and its dispatch cost about twice the poll itself;
/// docs/benchmarks.md, "Polls without messages"), when nothing else waits
/// for the actor or when its last activation ran messages: under a stream
/// of messages, polls and messages take turns, so the stream cannot hold
/// the poll (and the credits it reaps) off.
///
/// The rule that keeps this safe: CAF resumes an actor only while it is
/// scheduled, and `resume` returning `awaiting_message` gives that up (the
/// mailbox is blocked; the next message schedules it again, maybe on
/// another worker).  So a wanted poll either keeps the actor scheduled
/// (`resume_later`, after taking back a mailbox that nobody wrote to since
/// it was blocked) or becomes a `poll_atom` message to `Handle` when
/// someone did.
///
/// `alive`: the actor has not terminated.  `poll()` runs the poll (the
/// caller sets CAF's context first: it is outside any handler);
/// `run_messages()` runs the actor's messages (`run_activation`).  Called
/// by the actor's `resume` on the CAF worker that runs it.
template <class Handle, class Actor, class Poll, class RunMessages>
caf::resumable::resume_result resume_with_polls(Actor* self, direct_poll& dp,
                                                bool alive, Poll&& poll,
                                                RunMessages&& run_messages) {
  if (alive && (!dp.polled_last || self->mailbox().empty())
      && dp.wanted.exchange(false)) {
    dp.polled_last = true;
    poll();
    if (dp.wanted.load(std::memory_order_relaxed))
      return caf::resumable::resume_later;
  }
  dp.polled_last = false;
  auto result = run_messages();
  // From here on only the flag and the mailbox: after awaiting_message
  // another worker may run this actor.
  if (result != caf::resumable::awaiting_message || !dp.wanted.exchange(false))
    return result;
  if (self->mailbox().try_unblock()) {
    // Nobody wrote to the mailbox since CAF blocked it: still ours.
    dp.wanted.store(true, std::memory_order_relaxed);
    return caf::resumable::resume_later;
  }
  // A message came and scheduled us again: the poll goes behind it.
  caf::anon_send(caf::actor_cast<Handle>(self), poll_atom::value);
  return result;
}

} // namespace rdmactor::transport
