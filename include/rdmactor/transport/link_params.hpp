#pragma once

// The negotiated parameters of a connection and the limits the data path
// derives from them.  CAF-free: shared by `link` and the transport actor.

#include <cstddef>
#include <cstdint>
#include <string>

#include "rdmactor/transport/fabric.hpp"

namespace rdmactor::transport {

/// Largest header (bytes before the payload) of one `send`.
constexpr size_t max_send_header_bytes = 256;

/// Smallest receive depth the credit protocol works with: a data message
/// needs 2 credits and credits are returned in batches of half the pool;
/// with 2 receives both sides can end holding 1 credit each and owing the
/// other 1 (a stall).  A connection negotiated below it is refused.
constexpr uint32_t min_recv_depth = 4;

/// Negotiated parameters of a connection as the transport reports them.
struct link_params {
  uint32_t max_message_len_bytes = 0;
  uint32_t recv_depth = 0;
  std::string peer;
};

/// The negotiated parameters of `qp`, as the transport reports them.
inline link_params link_params_of(const queue_pair& qp) {
  const auto& cp = qp.params();
  return link_params{cp.max_message_len_bytes, cp.recv_depth, qp.peer_name()};
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, link_params& x) {
  return f(x.max_message_len_bytes, x.recv_depth, x.peer);
}

} // namespace rdmactor::transport
