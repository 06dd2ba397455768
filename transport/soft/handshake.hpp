#pragma once

#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "rdmactor/transport/fabric.hpp"
#include "transport/soft/deadline.hpp"
#include "transport/soft/wire.hpp"

/// The soft fabric's connection handshake.  The connecting side sends its
/// hello first; the listener reads it (bounded by `connect_timeout_ms`),
/// checks it and answers with its own hello, or drops the connection.  Both
/// sides then use the minimum of both offers.
namespace rdmactor::transport::soft {

/// What a successful handshake yields.
struct handshake_result {
  conn_params params;
  uint32_t peer_rnr_timeout_ms = 0;
};

/// Checks an offer of the local side; `invalid_argument` when a field is
/// outside the soft fabric's limits (a receive depth below
/// `min_recv_depth` included: the data path needs it).
caf::error check_offer(const conn_params& offer);

/// Returns the negotiated parameters: each field's minimum.
conn_params negotiate(const conn_params& ours,
                      const wire::hello& theirs) noexcept;

/// Returns why a hello was refused, for logs and errors.
const char* describe(wire::hello_status st) noexcept;

/// Connecting side: sends `ours` on the connected socket `fd`, then reads
/// and checks the listener's hello, all before `deadline`.  Fails with
/// `handshake_failed`, `version_mismatch`, `connect_timeout` or
/// `connect_failed`.
caf::expected<handshake_result>
client_handshake(int fd, const wire::hello& ours, const conn_params& offer,
                 time_point deadline, const std::string& peer);

} // namespace rdmactor::transport::soft
