#pragma once

namespace rdmactor {

/// Hands the heap's free memory back to the system (glibc's
/// `malloc_trim(0)`; nothing elsewhere), so that the resident size returns
/// near where it was before a peer made the node buffer its messages.
/// Called once per connection teardown (the agent's, after its transport
/// terminated), any thread.  When another thread is trimming already, it
/// returns at once instead of queueing behind it: one trim at a time
/// serves a burst of teardowns.  Returns whether it trimmed.
bool trim_heap() noexcept;

} // namespace rdmactor
