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
  const auto& live = st.core->live();
  keepalive_timer::instance().schedule(
      caf::actor_cast<caf::weak_actor_ptr>(self), at, live.group(),
      live.silence(), live.period());
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

bool agent_state::give_link_back(const caf::error& reason, agent_core* closing,
                                 const std::string& why,
                                 owned_regions regions) {
  if (link_given_back)
    return false;
  link_given_back = true;
  driver.stop(); // the posts it held leave first
  if (!transport)
    return false; // nothing can reach the memory any more
  transport::link_return back;
  back.reason = reason;
  if (closing != nullptr) {
    if (auto frame = closing->live().goodbye_frame(why)) {
      // The byte after the frame length tells a Goodbye from other
      // frames: the transport ends its wait when the peer's own arrives.
      auto marker = (*frame)[protocol::frame_header_len];
      back.goodbye = std::move(*frame);
      back.close_timeout_ms = closing->opts().close_timeout_ms;
      back.is_goodbye = [marker](const local_mr& msg) {
        return msg.size() > protocol::frame_header_len
               && msg.data()[protocol::frame_header_len] == marker;
      };
    }
  }
  if (!regions.empty())
    back.keep_until_closed
        = std::make_shared<owned_regions>(std::move(regions));
  back.trim_heap = true;
  bool graceful = !back.goodbye.empty();
  // In the transport's own name: the message's sender keeps it alive
  // until it handled it, also when our handle goes right after.
  caf::send_as(transport, transport, transport::lease_end_atom::value,
               std::move(back));
  return graceful;
}

} // namespace rdmactor::agent_detail
