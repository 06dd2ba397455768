#pragma once

#include <caf/fwd.hpp>

#include "rdmactor/connection.hpp"

namespace rdmactor::demo {

/// Spawns the server side of the demo for one accepted connection.
///
/// It answers every data chunk and every memory region the client hands
/// over with a 16-byte digest (length + FNV-1a) sent back with send_data,
/// reads regions the client lends it, and lends the client one region of
/// its own (`lent_mr_bytes`, pattern `lent_mr_seed`).  It stops when the
/// connection goes.
caf::actor spawn_server(caf::actor_system& sys, connection_actor conn);

/// Spawns the actor that receives `(accepted_atom, connection_actor)` from
/// `node::listen` and starts a server per connection.
caf::actor spawn_acceptor(caf::actor_system& sys);

} // namespace rdmactor::demo
