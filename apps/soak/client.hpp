#pragma once

#include <cstdint>
#include <string>

#include <caf/fwd.hpp>

#include "rdmactor/node.hpp"

namespace rdmactor::soak {

/// What one client process does.
struct client_config {
  /// The server, HOST:PORT.
  std::string target;
  /// Connections kept open at once (one worker thread each).
  uint32_t connections = 8;
  /// Operations over all connections.
  uint64_t ops = 2000;
  /// Seeds the choice of operations, sizes and faults.
  uint64_t seed = 1;
  /// Share of connections opened with a fault plan (soft fabric only):
  /// dropped after 0..max_bytes bytes, frame 1..200 corrupted, or every
  /// frame delayed 1..30 ms.
  double fault_rate = 0.2;
  /// Which faults: "any", "drop", "corrupt" or "delay".
  std::string fault_kind = "any";
  /// Largest payload of one operation.
  uint32_t max_bytes = 1 << 20;
};

/// What one client process saw.
struct client_report {
  uint64_t ops = 0;
  uint64_t verified = 0;    // reads checked on this side
  uint64_t connections = 0; // opened, including reconnects
  uint64_t faulty_connections = 0;
  uint64_t fault_errors = 0;      // errors on connections with a fault plan
  uint64_t unexpected_errors = 0; // errors on connections without one
  uint64_t corrupt = 0;           // payloads read back with other bytes
  uint64_t bytes_in_use_after = 0;
};

/// Runs `cfg.ops` random operations over `cfg.connections` connections of
/// `nd` (write + read back, send_data, lending regions, handing regions
/// back, allocating and releasing), reconnecting after a fault, then closes
/// every connection and reports, including the bytes still in use.
client_report run_client(caf::actor_system& sys, node& nd,
                         const client_config& cfg);

} // namespace rdmactor::soak
