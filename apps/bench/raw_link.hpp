#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "apps/bench/run_spec.hpp"
#include "rdmactor/detail/transport_actor.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor::bench {

/// Largest message a raw listener offers (8 MiB, what Soft-RoCE allows);
/// the connecting side offers what its largest size needs and the smaller
/// value wins.
constexpr uint32_t raw_listen_max_message_bytes = uint32_t{1} << 23;

/// Connects a raw endpoint: `dev->connect` plus `spawn_transport`, without
/// an agent or a connection actor.
caf::expected<transport::transport_actor>
raw_connect(caf::actor_system& sys, const transport::device_ptr& dev,
            const std::string& host_port, const transport::conn_params& offer,
            std::chrono::milliseconds timeout, transport::polling how);

/// Accepts raw endpoints on one address and serves each with a raw echo
/// actor (see `spawn_raw_echo`) on its own transport actor.
class raw_listener {
public:
  raw_listener() = default;
  raw_listener(const raw_listener&) = delete;
  raw_listener& operator=(const raw_listener&) = delete;

  /// Stops accepting and closes every transport it spawned.
  ~raw_listener();

  /// Listens on `host_port` (port 0: any) and starts the accept thread;
  /// returns the bound port.  Transports await completions as `how` says.
  caf::expected<uint16_t> start(caf::actor_system& sys,
                                transport::device_ptr dev,
                                const std::string& host_port,
                                const transport::conn_params& offer,
                                transport::polling how);

  /// Stops accepting and closes every transport it spawned.  Idempotent.
  void stop();

private:
  void run(caf::actor_system* sys);

  transport::device_ptr dev_;
  transport::polling how_;
  std::unique_ptr<transport::listener> listener_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::mutex mtx_;
  std::vector<transport::transport_actor> transports_;
};

/// Spawns the subscriber of a served raw endpoint: it echoes every message
/// whose first header byte is `echo_flag` (the header copied, the payload
/// sent zero copy from the receive buffer) and drops the others.
caf::actor spawn_raw_echo(caf::actor_system& sys,
                          transport::transport_actor transport);

} // namespace rdmactor::bench
