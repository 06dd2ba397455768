#pragma once

namespace rdmactor {

/// Hands the heap's free memory back to the system (glibc's
/// `malloc_trim(0)`; nothing elsewhere), so that the resident size returns
/// near where it was before a peer made the node buffer its messages.
/// Called once per connection teardown (the agent's, after its transport
/// terminated), any thread.  When another thread is trimming already, it
/// returns at once instead of queueing behind it, and that thread trims
/// once more when it is done (what this caller freed may have been freed
/// after its trim passed by): one thread trims for a burst of teardowns,
/// and none is missed.  Returns whether this call trimmed.
bool trim_heap() noexcept;

} // namespace rdmactor
