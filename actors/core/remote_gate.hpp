#pragma once

#include <cstdint>
#include <string_view>

#include <caf/actor_addr.hpp>
#include <caf/error.hpp>

#include "rdmactor/remote_mr.hpp"

namespace rdmactor::agent_detail {

/// What the agent is about to do with a `remote_mr`.  Each use has the
/// checks of `check_remote`; none of them posts anything.
enum class remote_use {
  /// A WRITE, READ or atomic on the peer's memory: the region is live and
  /// its lease (if any) still runs.
  post,
  /// RenewLease: as `post`, and the region was lent with a lease.
  renew,
  /// ReleaseMR: the region is ours to release and its lease still runs
  /// (an ended lease was revoked by its owner: nothing to release).
  release,
  /// SendMR REMOTE (hand the region back to its owner): the whole region,
  /// live, its lease still running.
  send_back,
};

/// The one gate every use of a `remote_mr` passes before the agent posts
/// anything for it: the handle is valid, belongs to `agent` (the
/// connection it came from), and is fit for `use` at `now_ns` (the
/// agent's steady clock, in nanoseconds since its epoch).  Returns an
/// empty error when it may go ahead; otherwise an rdmactor error whose
/// message starts with `what` and says what to do instead:
/// `invalid_argument` (null, another connection's, released or sent back,
/// not leased, a slice sent back) or `lease_expired`.  A second release or
/// send-back is the caller's to detect (`remote_mr_state::take`,
/// `already_sent`).
caf::error check_remote(const remote_mr& mr, const caf::actor_addr& agent,
                        int64_t now_ns, remote_use use, std::string_view what);

} // namespace rdmactor::agent_detail
