#pragma once

// A quiet default handler for actors that peers can reach.

#include <cstdint>

#include <caf/message_view.hpp>
#include <caf/result.hpp>
#include <caf/scheduled_actor.hpp>

namespace rdmactor {

/// Drops a message the actor's behavior does not take, counts it
/// (`unexpected_messages`) and logs one warning line per shared log budget
/// naming the message's types, never its values; a request gets
/// `caf::sec::unexpected_message` as its answer.  Install it in every
/// untyped actor that peers can reach (published actors, actors whose
/// handles travel): `self->set_default_handler(rdmactor::drop_unexpected)`.
/// CAF's default (`caf::print_and_drop`) prints every such message whole to
/// stdout, so any peer could fill the log with payloads of its choosing.
/// Typed actors need nothing: a node refuses a peer's message outside a
/// typed actor's interface before it reaches the actor.
caf::result<caf::message> drop_unexpected(caf::scheduled_actor* self,
                                          caf::message_view& x);

/// Messages `drop_unexpected` dropped in this process.
uint64_t unexpected_messages() noexcept;

} // namespace rdmactor
