#pragma once

// Internal to the agent: the acknowledgements of the peer's SendData that
// this node owes.  Not installed.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdmactor {

/// The acknowledgements (OK) of the peer's SendData requests that this
/// node owes and has not sent: gathered into one cumulative response
/// (flushed behind the frames being handled, or at once when a response
/// is full), or riding on our own next SendData (EXT_PIGGYBACK_ACKS).
/// Decides; the caller encodes and posts.  CAF-free, single-threaded.
class ack_gatherer {
public:
  /// What the owner does after `add`.
  enum class step : uint8_t {
    /// Nothing: a flush is scheduled already.
    none,
    /// Ask for a flush behind the frames queued now (the first id since
    /// the last flush).
    schedule_flush,
    /// Flush now: a response is full (`tuning::max_acks_per_response`).
    flush_now,
  };

  /// Owes the acknowledgement of the peer's request `id`.
  step add(uint64_t id);

  bool empty() const noexcept {
    return ids_.empty();
  }

  size_t size() const noexcept {
    return ids_.size();
  }

  /// The owed ids, oldest first.
  const std::vector<uint64_t>& ids() const noexcept {
    return ids_;
  }

  /// The flush went (built from `ids()`): forgets every owed id, keeping
  /// the storage for the next ones; a scheduled flush is done.
  void clear() noexcept;

  /// How many of the owed ids (the oldest) fit in `room` bytes of a
  /// SendData frame, at most `tuning::max_acks_per_response`; 0 when not
  /// even one fits.
  size_t fit(size_t room) const noexcept;

  /// The oldest `n` rode on a SendData.
  void attached(size_t n);

private:
  std::vector<uint64_t> ids_;
  bool scheduled_ = false;
};

} // namespace rdmactor
