#pragma once

// What a bare transport delivers, forwarded to an actor: the inbox of a
// test or tool that plays a peer without an agent (hostile_fixture.hpp,
// test/reliability/raw_peer.hpp, hostile_probe.cpp).

#include <cstdint>

#include <caf/actor.hpp>
#include <caf/error.hpp>
#include <caf/send.hpp>

#include "rdmactor/detail/transport_actor.hpp"
#include "rdmactor/local_mr.hpp"

namespace rdmactor::test {

/// Forwards every frame, immediate value and the link's end that a
/// transport delivers to `dst`.  Spawn it and subscribe it to the
/// transport (`subscribe_atom`).
inline transport::transport_subscriber::behavior_type
raw_forwarder(transport::transport_subscriber::pointer, caf::actor dst) {
  return {
      [dst](transport::recv_atom a, local_mr& mr) {
        caf::anon_send(dst, a, mr);
      },
      [dst](transport::imm_arrived_atom a, uint32_t imm, uint32_t n) {
        caf::anon_send(dst, a, imm, n);
      },
      [dst](transport::qp_down_atom a, caf::error& e) {
        caf::anon_send(dst, a, e);
      },
  };
}

} // namespace rdmactor::test
