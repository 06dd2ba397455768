#pragma once

// Internal to the agent: the memory a node keeps alive for one peer.  Not
// installed.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include <caf/expected.hpp>

#include "rdmactor/local_mr.hpp"
#include "rdmactor/memory_pool.hpp"
#include "rdmactor/mr_token.hpp"

namespace rdmactor {

/// A memory region kept alive for the peer.
struct owned_mr {
  local_mr mr;
  bool by_peer; // allocated by the peer's AllocMR (counts to its quota)
  /// Lent with a lease: the registration the peer's token names (revoked
  /// with the entry; declared after `mr`, so it goes first), when the lease
  /// ends and its duration (the most a renewal grants).
  std::shared_ptr<transport::memory_region> lease_reg = nullptr;
  std::chrono::steady_clock::time_point lease_end
      = std::chrono::steady_clock::time_point::max();
  uint32_t lease_ms = 0;
};

/// Regions kept alive for the peer, by the token it knows them by.
using owned_regions = std::map<mr_token, owned_mr>;

/// The regions a node keeps alive for one peer, by the token the peer
/// knows each by: memory the peer allocated (AllocMR, counted against its
/// quota: peer-max-mrs regions, peer-max-alloc-bytes bytes) and memory
/// lent to it (SendMR LOCAL).  Either may carry a lease: a registration of
/// its own, whose token stops working when the lease ends unless the peer
/// renews it.  Clock-free: the caller passes the time.  Single-threaded.
class held_regions {
public:
  using time_point = std::chrono::steady_clock::time_point;

  held_regions(uint32_t max_peer_mrs, uint64_t max_peer_bytes)
      : max_peer_mrs_(max_peer_mrs), max_peer_bytes_(max_peer_bytes) {}

  /// Regions held.
  size_t size() const noexcept {
    return regions_.size();
  }

  /// Regions and bytes the peer allocated.
  uint32_t peer_mrs() const noexcept {
    return peer_mrs_;
  }
  uint64_t peer_bytes() const noexcept {
    return peer_bytes_;
  }

  /// Whether the peer may allocate a region of `bytes` more.
  bool quota_allows(uint64_t bytes) const noexcept {
    return peer_mrs_ < max_peer_mrs_ && peer_bytes_ <= max_peer_bytes_
           && bytes <= max_peer_bytes_ - peer_bytes_;
  }

  /// Whether a region is held under `token`.
  bool holds(const mr_token& token) const {
    return regions_.count(token) != 0;
  }

  /// Keeps `mr` alive for the peer (`by_peer`: its AllocMR, counted to its
  /// quota).  With `lease_ms` not 0 it goes under a registration of its
  /// own from `pool` (so that the lease's end revokes exactly this token),
  /// ending at `now + lease_ms` unless renewed.  Returns the token the peer
  /// gets; errors: `already_sent` when `mr` is held already, those of
  /// `memory_pool::register_again`.
  caf::expected<mr_token> hold(local_mr mr, bool by_peer, uint32_t lease_ms,
                               time_point now, memory_pool& pool);

  /// Stops holding the region `token` names and returns its memory (it
  /// returns to the pool when the last handle goes); nothing when none is
  /// held under it.
  std::optional<local_mr> release(const mr_token& token);

  /// Extends the lease of `token` to `now` plus `lease_ms`, at most the
  /// lease it was lent with; returns the milliseconds granted, nothing
  /// when no lease is held under `token` (it ended, was released, or was
  /// lent without one).
  std::optional<uint32_t> renew(const mr_token& token, uint32_t lease_ms,
                                time_point now);

  /// Revokes every lease that ended at or before `now` (the entry goes and
  /// with it the lease's registration: the peer's token stops working),
  /// telling `revoked` first.  Returns the earliest lease end left
  /// (`time_point::max()`: none).
  time_point
  expire(time_point now,
         const std::function<void(const mr_token&, const owned_mr&)>& revoked);

  /// Hands over every region and resets the quota (the connection ends).
  owned_regions take_all();

private:
  local_mr erase(owned_regions::iterator i);

  uint32_t max_peer_mrs_;
  uint64_t max_peer_bytes_;
  owned_regions regions_;
  uint64_t peer_bytes_ = 0; // sum over entries with by_peer
  uint32_t peer_mrs_ = 0;
};

} // namespace rdmactor
