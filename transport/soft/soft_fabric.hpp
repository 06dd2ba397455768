#pragma once

#include "rdmactor/transport/fabric.hpp"

/// The soft fabric: a faithful user-space model of RDMA reliable-connected
/// queue pairs over TCP, so that every layer above the fabric interface
/// runs and is tested without RDMA hardware.  See soft_queue_pair.hpp for
/// the semantics and faults.hpp for fault injection.
namespace rdmactor::transport::soft {

/// Opens a soft device ("soft0", kind "soft") with its own protection
/// domain.  Connections use `opts.connect_timeout_ms` (listener-side
/// handshake bound), `opts.rnr_timeout_ms` (how long an inbound SEND waits
/// for a posted receive) and `opts.request_timeout_ms` (plus the peer's RNR
/// timeout: how long requests may wait without a byte from the peer before
/// `transport_retry_exceeded`).  Fails with `invalid_argument` when
/// `validate(opts)` rejects the options.
caf::expected<device_ptr> open_device(const options& opts);

} // namespace rdmactor::transport::soft
