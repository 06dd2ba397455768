#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <caf/actor_addr.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/expected.hpp>
#include <caf/weak_intrusive_ptr.hpp>

#include "rdmactor/mr_token.hpp"

namespace rdmactor {

namespace detail {
struct remote_mr_access;
} // namespace detail

/// Shared state of a remote memory region: the peer's token and the agent
/// that releases it.  When the last handle goes and the region was neither
/// released explicitly nor sent back to its owner, the destructor asks the
/// agent to send ReleaseMR (fire and forget).
class remote_mr_state {
public:
  remote_mr_state(mr_token token, caf::actor_addr agent)
      : token_(token), agent_(std::move(agent)) {}

  ~remote_mr_state();

  const mr_token& token() const noexcept {
    return token_;
  }

  const caf::actor_addr& agent() const noexcept {
    return agent_;
  }

  /// Marks the region as released or handed back; returns false when it
  /// was already (each region is released at most once).
  bool take() noexcept {
    return !done_.exchange(true);
  }

  bool done() const noexcept {
    return done_.load();
  }

  /// The end of the region's lease on the agent's clock (steady_clock, in
  /// nanoseconds since its epoch); 0 when it has no lease.  Set by the
  /// agent when the token arrives and when a renewal is granted.
  int64_t lease_end_ns() const noexcept {
    return lease_end_ns_.load();
  }

  /// Whether the region's lease ended by `now_ns` (the same clock as
  /// `lease_end_ns`); false without a lease.  Its owner revoked it then.
  bool lease_ended_at(int64_t now_ns) const noexcept {
    auto end = lease_end_ns_.load();
    return end != 0 && now_ns >= end;
  }

  void set_lease_end_ns(int64_t x) noexcept {
    lease_end_ns_.store(x);
  }

private:
  mr_token token_;
  caf::actor_addr agent_;
  std::atomic<bool> done_{false};
  std::atomic<int64_t> lease_end_ns_{0};
};

/// A handle to memory on the peer (async-rdma's RemoteMr).
///
/// Obtained from `request_remote_mr` (the peer allocated it for us) or
/// `receive_remote_mr` (the peer sent us its memory).  Slices share the
/// region.  Use it as the target of `write`/`read` on the connection it came
/// from.  Released explicitly (`release_atom`) or when the last handle goes.
class remote_mr {
public:
  remote_mr() = default;

  explicit remote_mr(std::shared_ptr<remote_mr_state> st)
      : state_(std::move(st)), offset_(0), length_(state_->token().len) {}

  bool valid() const noexcept {
    return state_ != nullptr;
  }

  /// Returns the token of this (possibly sliced) range.
  mr_token token() const noexcept {
    if (!state_)
      return {};
    return mr_token{state_->token().addr + offset_, length_,
                    state_->token().rkey};
  }

  uint64_t size() const noexcept {
    return length_;
  }

  /// Returns the sub-range [offset, offset + length) or `out_of_bounds`.
  caf::expected<remote_mr> slice(uint64_t offset, uint64_t length) const;

  /// Returns true when this handle covers the whole region.
  bool whole() const noexcept {
    return state_ && offset_ == 0 && length_ == state_->token().len;
  }

private:
  /// The agent reaches the shared state through remote_mr_access
  /// (actors/node/remote_mr_access.hpp, internal).
  friend struct detail::remote_mr_access;

  std::shared_ptr<remote_mr_state> state_;
  uint64_t offset_ = 0;
  uint64_t length_ = 0;
};

} // namespace rdmactor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rdmactor::remote_mr)
