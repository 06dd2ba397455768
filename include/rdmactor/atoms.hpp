#pragma once

#include <caf/atom.hpp>

#include "rdmactor/detail/transport_atoms.hpp"

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
/// Internal: proxies handed serialized messages to the agent's outbox
/// (sent once per batch: the first message into an empty outbox).
using actor_out_atom = caf::atom_constant<caf::atom("actor_out")>;
/// Internal: credit for the peer's actor messages is due (an ActorAck).
using actor_ack_atom = caf::atom_constant<caf::atom("actor_ack")>;

/// Atom values under their full names, so that calls need no `::value`
/// (as CAF 0.18's `caf::get_atom_v`):
/// `self->request(conn, 5s, alloc_local_mr_atom_v, size, align)`.
/// The C++ names are the readable ones: CAF 0.17 limits the text of an
/// atom (what `to_string` of a message shows) to 10 characters, so some
/// texts are abbreviated (`alloc_lmr` is `alloc_local_mr_atom`).
constexpr auto alloc_local_mr_atom_v = alloc_local_mr_atom::value;
constexpr auto alloc_for_peer_atom_v = alloc_for_peer_atom::value;
constexpr auto request_remote_mr_atom_v = request_remote_mr_atom::value;
constexpr auto send_mr_atom_v = send_mr_atom::value;
constexpr auto receive_local_mr_atom_v = receive_local_mr_atom::value;
constexpr auto receive_remote_mr_atom_v = receive_remote_mr_atom::value;
constexpr auto send_data_atom_v = send_data_atom::value;
constexpr auto receive_data_atom_v = receive_data_atom::value;
constexpr auto subscribe_data_atom_v = subscribe_data_atom::value;
constexpr auto data_atom_v = data_atom::value;
constexpr auto release_atom_v = release_atom::value;
constexpr auto stats_atom_v = stats_atom::value;
constexpr auto peer_atom_v = peer_atom::value;
constexpr auto accepted_atom_v = accepted_atom::value;
constexpr auto connect_atom_v = connect_atom::value;
constexpr auto listen_atom_v = listen_atom::value;
constexpr auto close_atom_v = close_atom::value;
constexpr auto write_atom_v = write_atom::value;
constexpr auto read_atom_v = read_atom::value;
constexpr auto fetch_add_atom_v = fetch_add_atom::value;
constexpr auto compare_swap_atom_v = compare_swap_atom::value;
constexpr auto write_with_imm_atom_v = write_with_imm_atom::value;
constexpr auto imm_atom_v = imm_atom::value;
constexpr auto receive_imm_atom_v = receive_imm_atom::value;
constexpr auto receive_tagged_local_mr_atom_v
    = receive_tagged_local_mr_atom::value;
constexpr auto receive_tagged_remote_mr_atom_v
    = receive_tagged_remote_mr_atom::value;
constexpr auto renew_lease_atom_v = renew_lease_atom::value;
constexpr auto publish_atom_v = publish_atom::value;
constexpr auto unpublish_atom_v = unpublish_atom::value;
constexpr auto lookup_atom_v = lookup_atom::value;

} // namespace rdmactor
