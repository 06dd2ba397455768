// The agent actor's keepalive timer and graceful close (the protocol side
// is in agent_core_keepalive.cpp).

#include <algorithm>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include "actors/connection/agent_state.hpp"
#include "actors/connection/keepalive_timer.hpp"
#include "common/logging.hpp"
#include "protocol/codec.hpp"

namespace rdmactor::agent_detail {

namespace {

/// Arms the keepalive check at `at` (one arming at a time) on the
/// process's keepalive timer, which holds us weakly (a connection nobody
/// holds goes away while it waits).
void arm_keepalive(self_ptr self, clock_type::time_point at) {
  auto& st = self->state;
  if (st.keepalive_armed || at == clock_type::time_point::max())
    return;
  st.keepalive_armed = true;
  keepalive_timer::instance().schedule(
      caf::actor_cast<caf::weak_actor_ptr>(self), at, st.heard_at,
      st.core->live().silence());
}

} // namespace

void after_frame(self_ptr self) {
  auto& st = self->state;
  auto& core = *st.core;
  if (core.closed())
    return;
  if (core.live().peer_said_goodbye()) {
    auto reason = core.live().goodbye_reason();
    shut_down(self, make_error(errc::peer_closed,
                               "the peer " + core.link().peer
                                   + " closed the connection"
                                   + (reason.empty() ? std::string{}
                                                     : " (" + reason + ")")));
    return;
  }
  if (!st.keepalive_armed && core.live().keepalive_active())
    arm_keepalive(self, core.live().keepalive(self->clock().now()).next);
}

void on_keepalive(self_ptr self) {
  auto& st = self->state;
  st.keepalive_armed = false;
  if (st.core->closed())
    return;
  auto step = st.core->live().keepalive(self->clock().now());
  if (step.dead) {
    shut_down(self, step.dead);
    return;
  }
  arm_keepalive(self, step.next);
}

bool agent_state::close_gracefully(const transport_actor& tr, agent_core& core,
                                   const std::string& reason) {
  if (!tr)
    return false;
  auto frame = core.live().goodbye_frame(reason);
  if (!frame)
    return false;
  // The byte after the frame length tells a Goodbye from other frames: the
  // transport ends its wait when the peer's own Goodbye arrives.
  auto marker = (*frame)[protocol::frame_header_len];
  // In the transport's own name: the message's sender keeps it alive
  // until it handled the request, also when our handle goes right after.
  caf::send_as(tr, tr, transport::close_atom::value, std::move(*frame),
               core.opts().close_timeout_ms, marker);
  return true;
}

} // namespace rdmactor::agent_detail
