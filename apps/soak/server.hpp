#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <caf/fwd.hpp>

#include "rdmactor/connection.hpp"

namespace rdmactor::soak {

/// What the serving side verified, over all connections.
struct server_counters {
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> data_chunks{0};
  std::atomic<uint64_t> data_payloads{0};
  std::atomic<uint64_t> lent_regions{0};     // SendMR LOCAL: read + checked
  std::atomic<uint64_t> returned_regions{0}; // SendMR REMOTE: checked
  std::atomic<uint64_t> corrupt_data{0};     // chunks that fit no payload
  std::atomic<uint64_t> corrupt_lent{0};     // lent regions read wrong
  std::atomic<uint64_t> corrupt_returned{0}; // returned regions wrong
  /// Lent regions not read: no memory for them within
  /// rdmactor.peer-max-claim-bytes (or another allocation error).
  std::atomic<uint64_t> refused_lent{0};

  uint64_t corrupt() const {
    return corrupt_data + corrupt_lent + corrupt_returned;
  }
};

/// Spawns the actor that receives `(accepted_atom, connection_actor)` and
/// serves each connection: it claims every data chunk, lent region and
/// returned region, checks each payload, and drops it (lent regions go back
/// to the client with ReleaseMR).  Memory to read a lent region comes from
/// alloc_for_peer: over rdmactor.peer-max-claim-bytes the region is counted
/// in `refused_lent` and released unread.  Stops serving a connection when it
/// goes.
caf::actor spawn_soak_acceptor(caf::actor_system& sys,
                               std::shared_ptr<server_counters> counters);

} // namespace rdmactor::soak
