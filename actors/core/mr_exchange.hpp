#pragma once

// Internal to the agent: the memory-region requests of the protocol core.
// Not installed.

#include <cstdint>
#include <functional>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/core/core_port.hpp"
#include "actors/core/held_regions.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/local_mr.hpp"
#include "rdmactor/mr_token.hpp"

namespace rdmactor {

/// The memory-region requests of one connection, both ways: AllocMR,
/// ReleaseMR, SendMR LOCAL (we lend, the peer lends) and REMOTE (a region
/// goes back to its owner), RenewLease; and the regions held for the peer
/// (`held_regions`: its quota, leases and their end).  Every token from the
/// peer is checked against what is held for it.
///
/// Part of `agent_core`, which routes these requests and answers here and
/// lends its services through `core_port`; single-threaded like it.  A
/// request of ours pending at close fails with the close error.
class mr_exchange {
public:
  using time_point = core_port::time_point;

  explicit mr_exchange(core_port& core);

  mr_exchange(const mr_exchange&) = delete;
  mr_exchange& operator=(const mr_exchange&) = delete;

  // -- our requests -----------------------------------------------------------

  /// Asks the peer for `size` bytes aligned to `align` (AllocMR); `done`
  /// gets the token or an error.  A late OK answer after a timeout is
  /// released at once (the core's `release_late_alloc`).
  void alloc(uint64_t size, uint64_t align, time_point now,
             std::function<void(caf::expected<mr_token>)> done);

  /// The same; `done` also gets the region's lease in milliseconds (0:
  /// none; AllocMRResponse.lease_ms).
  void
  alloc_leased(uint64_t size, uint64_t align, time_point now,
               std::function<void(caf::expected<mr_token>, uint32_t)> done);

  /// Lends `mr` to the peer (SendMR LOCAL), held until the peer releases
  /// it or the connection ends; `done` gets the token or an error (then
  /// the region is no longer held, unless the connection is closing: it
  /// stays until `take_all`).  A `tag` needs the peer's EXT_MR_TAGS; with
  /// `lease_ms` > 0 (the peer's EXT_LEASES, else `not_negotiated`) the
  /// token names a registration of its own over `mr`, revoked `lease_ms`
  /// after the lending unless the peer renews it (`expire_leases`).
  void lend(local_mr mr, time_point now,
            std::function<void(caf::expected<mr_token>)> done, uint64_t tag = 0,
            uint32_t lease_ms = 0);

  /// Asks the lender of `token` to extend its lease by `lease_ms`
  /// (RenewLease); `done` gets the granted milliseconds, or
  /// `lease_expired` when the lender no longer holds the lease.
  void renew_lease(const mr_token& token, uint32_t lease_ms, time_point now,
                   std::function<void(caf::expected<uint32_t>)> done);

  /// Hands the peer's region `token` back to it (SendMR REMOTE); `done`
  /// gets an empty error on success.
  void give_back(const mr_token& token, time_point now,
                 std::function<void(const caf::error&)> done, uint64_t tag = 0);

  /// Releases the peer's region `token` (ReleaseMR); `done` gets an empty
  /// error on success.  Without `done` (a dropped remote_mr, a late AllocMR
  /// answer) a failure other than the connection's end is logged.
  void release(const mr_token& token, time_point now,
               std::function<void(const caf::error&)> done = {});

  // -- the peer's requests (from the core's responder) ------------------------

  void on_alloc_mr(uint64_t id, const protocol::AllocMR& req);
  void on_release_mr(uint64_t id, const protocol::ReleaseMR& req);
  void on_send_mr(uint64_t id, const protocol::SendMR& req);
  void on_renew_lease(uint64_t id, const protocol::RenewLease& req);

  // -- the regions held for the peer ------------------------------------------

  const held_regions& held() const noexcept {
    return held_;
  }

  /// Revokes the leases that ended at or before `now`; returns the
  /// earliest lease end left (`time_point::max()`: none).
  time_point expire_leases(time_point now);

  /// Hands over every region held for the peer and resets its quota (the
  /// connection ends).
  owned_regions take_all() {
    return held_.take_all();
  }

private:
  void lend_now(local_mr mr, uint64_t tag, uint32_t lease_ms, time_point now,
                std::function<void(caf::expected<mr_token>)> done);
  void give_back_now(const mr_token& token, uint64_t tag, time_point now,
                     std::function<void(const caf::error&)> done);

  core_port& core_;
  held_regions held_;
};

} // namespace rdmactor
