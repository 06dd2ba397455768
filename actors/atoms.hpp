#pragma once

#include <caf/atom.hpp>

#include "transport/atoms.hpp"

/// Message tags of the actor layer (users see these).
namespace rdmactor {

using transport::compare_swap_atom;
using transport::fetch_add_atom;
using transport::read_atom;
using transport::write_atom;

using alloc_local_mr_atom = caf::atom_constant<caf::atom("alloc_lmr")>;
using alloc_for_peer_atom = caf::atom_constant<caf::atom("alloc_peer")>;
using request_remote_mr_atom = caf::atom_constant<caf::atom("req_rmr")>;
using send_mr_atom = caf::atom_constant<caf::atom("send_mr")>;
using receive_local_mr_atom = caf::atom_constant<caf::atom("recv_lmr")>;
using receive_remote_mr_atom = caf::atom_constant<caf::atom("recv_rmr")>;
using send_data_atom = caf::atom_constant<caf::atom("send_data")>;
using receive_data_atom = caf::atom_constant<caf::atom("recv_data")>;
using subscribe_data_atom = caf::atom_constant<caf::atom("sub_data")>;
using data_atom = caf::atom_constant<caf::atom("data")>;
using release_atom = caf::atom_constant<caf::atom("release")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using alloc_atom = caf::atom_constant<caf::atom("alloc")>;
using peer_atom = caf::atom_constant<caf::atom("peer")>;
using accepted_atom = caf::atom_constant<caf::atom("accepted")>;
using timeout_atom = caf::atom_constant<caf::atom("timeout")>;
using flush_acks_atom = caf::atom_constant<caf::atom("flush_acks")>;
using connect_atom = caf::atom_constant<caf::atom("connect")>;
using listen_atom = caf::atom_constant<caf::atom("listen")>;
using close_atom = caf::atom_constant<caf::atom("close")>;
/// `(write_with_imm_atom, local_mr, remote_mr, uint32_t) -> bytes`.
using write_with_imm_atom = transport::write_imm_atom;
/// Tags what carries an immediate value to a chunk_subscriber.
using imm_atom = caf::atom_constant<caf::atom("imm")>;
using receive_imm_atom = caf::atom_constant<caf::atom("recv_imm")>;
using receive_tagged_local_mr_atom = caf::atom_constant<caf::atom("recv_tlmr")>;
using receive_tagged_remote_mr_atom
    = caf::atom_constant<caf::atom("recv_trmr")>;
using renew_lease_atom = caf::atom_constant<caf::atom("renew")>;
/// `(publish_atom, name, caf::actor) -> bool`: remote actors.
using publish_atom = caf::atom_constant<caf::atom("publish")>;
/// `(unpublish_atom, name) -> bool`.
using unpublish_atom = caf::atom_constant<caf::atom("unpublish")>;
/// `(lookup_atom, name) -> caf::actor` (a proxy of the peer's actor).
using lookup_atom = caf::atom_constant<caf::atom("lookup")>;
/// Internal: a proxy hands a serialized message to its agent.
using actor_out_atom = caf::atom_constant<caf::atom("actor_out")>;

} // namespace rdmactor
