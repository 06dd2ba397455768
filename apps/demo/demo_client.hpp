#pragma once

#include <caf/fwd.hpp>

#include "rdmactor/connection.hpp"

namespace rdmactor::demo {

/// Walks through every operation against a demo server, verifying every
/// byte by checksum, printing one line per operation.  Returns true when
/// every step verified.
bool run_client(caf::actor_system& sys, const connection_actor& conn);

} // namespace rdmactor::demo
