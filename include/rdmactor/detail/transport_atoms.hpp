#pragma once

#include <caf/atom.hpp>

/// Message tags of the transport layer.
namespace rdmactor::transport {

using send_atom = caf::atom_constant<caf::atom("send")>;
using post_atom = caf::atom_constant<caf::atom("post")>;
using write_atom = caf::atom_constant<caf::atom("write")>;
using read_atom = caf::atom_constant<caf::atom("read")>;
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;
using recv_atom = caf::atom_constant<caf::atom("recv")>;
using qp_down_atom = caf::atom_constant<caf::atom("qp_down")>;
using cq_event_atom = caf::atom_constant<caf::atom("cq_event")>;
using poll_atom = caf::atom_constant<caf::atom("poll")>;
using repost_atom = caf::atom_constant<caf::atom("repost")>;
using params_atom = caf::atom_constant<caf::atom("params")>;
using fetch_add_atom = caf::atom_constant<caf::atom("fetch_add")>;
using compare_swap_atom = caf::atom_constant<caf::atom("cmp_swap")>;
/// The agent gives its connection's link back to the transport that lent it.
using lease_end_atom = caf::atom_constant<caf::atom("lease_end")>;
using close_timeout_atom = caf::atom_constant<caf::atom("close_tout")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
/// An RDMA WRITE with immediate data (request to the transport; the
/// connection's `write_with_imm` uses the same tag).
using write_imm_atom = caf::atom_constant<caf::atom("write_imm")>;
/// The peer's RDMA WRITE with immediate data arrived (to the subscriber).
using imm_arrived_atom = caf::atom_constant<caf::atom("imm_in")>;

} // namespace rdmactor::transport
