#pragma once

// Internal to the agent: the requests of one connection that wait for the
// peer's answer.  Not installed.

#include <chrono>
#include <cstdint>
#include <functional>
#include <unordered_set>
#include <vector>

#include <caf/error.hpp>

#include "common/inline_function.hpp"
#include "common/ring_deque.hpp"
#include "protocol/messages.hpp"

namespace rdmactor {

/// The requests to the peer that wait for its answer: their ids, deadlines
/// and completions, and the ids of those that timed out (an answer to one
/// is late, not noise).  Slots are pooled: a request takes a free slot of
/// a vector that grows to the most requests ever pending at once, and its
/// id names the slot in its low `slot_bits` bits under random high bits,
/// so an answer finds its request without hashing and a forged id finds
/// nothing.  CAF-free and clock-free: the caller passes the time.
/// Single-threaded.
class request_table {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// Called once with the peer's answer (`res` set, `err` empty) or an
  /// error (`res` null): timeout, send failure, connection gone.  Its
  /// callable lives in place up to 48 bytes: a data-path chunk's
  /// completion allocates nothing.
  using completion_fn
      = inline_function<void(const protocol::Response* res, const caf::error&)>;

  /// Bits of an id that name its slot: at most 2^24 requests pending.
  static constexpr unsigned slot_bits = 24;

  /// Holds at most `max_pending` requests (capped at 2^slot_bits).
  explicit request_table(size_t max_pending);

  /// A fresh id for the next request: never 0, the top bit clear, not
  /// pending, naming the slot the next `add` takes.  Ids that are never
  /// added (a Ping's) are harmless.
  uint64_t new_id();

  /// Requests pending.
  size_t size() const noexcept {
    return pending_;
  }

  /// No room for another request.
  bool full() const noexcept {
    return pending_ >= max_pending_;
  }

  /// The most requests pending at once.
  size_t capacity() const noexcept {
    return max_pending_;
  }

  /// Slots allocated: the most requests that were ever pending at once.
  size_t slots() const noexcept {
    return slots_.size();
  }

  /// Whether `id` (any value, e.g. from the peer) is pending.
  bool pending(uint64_t id) const noexcept {
    return find(id) != nullptr;
  }

  /// Adds the request `id` (from `new_id`), answered by `done` unless it
  /// times out at `deadline`.  Returns false, and adds nothing, when `id`
  /// did not come from `new_id` or its slot was taken since, or the table
  /// is full; `done` is then left as it was.
  bool add(uint64_t id, completion_fn&& done, time_point deadline);

  /// Finishes the request `id` once: removes it, then calls its completion
  /// with `res` and `err`.  Returns false when `id` is not pending.
  bool complete(uint64_t id, const protocol::Response* res,
                const caf::error& err);

  /// Fails every request whose deadline is `now` or earlier with `err`,
  /// remembering its id as late.  Returns how many.
  size_t expire(time_point now, const caf::error& err);

  /// The earliest deadline of a pending request (`time_point::max()`:
  /// none).
  time_point next_deadline() const noexcept;

  /// Fails every pending request with `err` (the connection ended).
  /// Completions may add new requests; those stay.
  void fail_all(const caf::error& err);

  /// Whether `id` timed out and no answer came for it since; forgets it
  /// (one late answer per request).  At most `max_late` ids are kept,
  /// the oldest go first.
  bool take_late(uint64_t id);

  /// Remembers the AllocMR `id` that timed out: a late OK answer to it is
  /// released on the peer (`take_late_alloc`).  Bounded like late ids.
  void remember_late_alloc(uint64_t id);

  /// Whether `id` is a timed-out AllocMR; forgets it and its late id.
  bool take_late_alloc(uint64_t id);

private:
  struct slot {
    /// 0: free.
    uint64_t id = 0;
    time_point deadline;
    completion_fn done;
  };

  static constexpr uint64_t slot_mask = (uint64_t{1} << slot_bits) - 1;

  const slot* find(uint64_t id) const noexcept;
  void remember_late(uint64_t id);
  /// Frees slot `i` and returns its completion.
  completion_fn release(size_t i);

  size_t max_pending_;
  std::vector<slot> slots_;
  /// Free slots below slots_.size(); the last one is taken next.
  std::vector<uint32_t> free_;
  size_t pending_ = 0;
  ring_deque<uint64_t> late_ids_;
  std::unordered_set<uint64_t> late_id_set_;
  ring_deque<uint64_t> late_allocs_;
};

/// Turns a non-OK response status into an error naming the request
/// (`what`) and the peer's code and detail.
caf::error status_error(const protocol::Response& res, const char* what);

/// Checks that `res` answers a request of kind `expected` with status OK:
/// another kind is `malformed_message`, a refusal carries the peer's code.
caf::error check_response(const protocol::Response& res,
                          protocol::Response::BodyCase expected,
                          const char* what);

} // namespace rdmactor
