#include "actors/core/remote_gate.hpp"

#include <string>

#include "actors/node/remote_mr_access.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor::agent_detail {

caf::error check_remote(const remote_mr& mr, const caf::actor_addr& agent,
                        int64_t now_ns, remote_use use, std::string_view what) {
  auto fail = [what](errc code, std::string_view why) {
    std::string msg{what};
    msg += ": ";
    msg += why;
    return make_error(code, std::move(msg));
  };
  if (!mr.valid())
    return fail(errc::invalid_argument,
                "needs a valid remote_mr (this one is empty)");
  const auto& st = *detail::state_of(mr);
  if (st.agent() != agent)
    return fail(errc::invalid_argument,
                "the remote_mr belongs to another connection; use the "
                "connection it came from");
  if (use == remote_use::renew && st.lease_end_ns() == 0)
    return fail(errc::invalid_argument,
                "this remote_mr was lent without a lease; it stays until "
                "released");
  if (use == remote_use::send_back && !mr.whole())
    return fail(errc::invalid_argument,
                "send the whole remote_mr back, not a slice");
  // A second release or send-back answers already_sent (the caller's
  // take()); any other use of a finished region is a plain misuse.
  if ((use == remote_use::post || use == remote_use::renew) && st.done())
    return fail(errc::invalid_argument,
                "the remote_mr was released or sent back");
  if (st.lease_ended_at(now_ns))
    return fail(errc::lease_expired,
                "the lease of this remote_mr ended (its owner revoked it); "
                "renew leases before they end (renew_lease) or ask for the "
                "region again");
  return {};
}

} // namespace rdmactor::agent_detail
