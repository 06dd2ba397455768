#pragma once

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "apps/bench/run_channel.hpp"
#include "apps/bench/run_spec.hpp"
#include "rdmactor/detail/transport_actor.hpp"
#include "rdmactor/local_mr.hpp"

namespace rdmactor::bench {

/// Spawns the driver of one `raw` run on `transport`: it subscribes to the
/// transport and sends `raw_header_bytes` of header plus `payload` per
/// message.  lat: ping-pong with the raw echo actor, a sample is half the
/// round trip.  bw: a window of sends flagged `sink_flag`; a send
/// completes when the fabric reports it placed on the peer.
caf::actor spawn_raw_driver(caf::actor_system& sys,
                            transport::transport_actor transport,
                            local_mr payload, run_spec spec,
                            run_channel_ptr chan);

} // namespace rdmactor::bench
