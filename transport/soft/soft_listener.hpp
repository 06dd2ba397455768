#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rdmactor/transport/fabric.hpp"
#include "transport/soft/deadline.hpp"
#include "transport/soft/event_fd.hpp"
#include "transport/soft/unique_fd.hpp"
#include "transport/soft/wire.hpp"

namespace rdmactor::transport::soft {

class soft_device;

/// A soft-fabric listener: a TCP listening socket plus the handshakes in
/// progress.
///
/// `accept` runs every handshake at once (non-blocking), so a silent or
/// slow stranger never delays a real peer; each handshake gets
/// `connect_timeout_ms` from the moment its TCP connection was taken.
/// Strangers that send garbage, another protocol version or out-of-range
/// parameters, that close, or that stay silent are logged (rate-limited)
/// and dropped; `accept` keeps waiting.  Admission is fair per source
/// address: one address has at most
/// `limits::max_pending_handshakes_per_address` handshakes in progress
/// (its next connection drops its own oldest, silent ones first), and when
/// all `limits::max_pending_handshakes` are in use a new connection drops
/// one of the address with the most, so a flood of silent connections from
/// some addresses never evicts the clients of others.  A client dropped
/// for admission or its deadline gets a refusal hello first
/// (`wire::refusal`) and reports why.  Handshakes in progress when
/// `accept` returns continue in the next call.
class soft_listener final : public listener {
public:
  /// Creates a listener on the bound, listening socket `sock`.
  static caf::expected<std::unique_ptr<listener>>
  make(std::shared_ptr<soft_device> dev, unique_fd sock, uint16_t port,
       const conn_params& offer);

  uint16_t port() const noexcept override {
    return port_;
  }

  caf::expected<queue_pair_ptr>
  accept(std::chrono::milliseconds timeout) override;

  /// Stops listening at once (new connection attempts are refused), drops
  /// the handshakes in progress and wakes a blocked `accept`, which
  /// returns `closed`.
  void close() override;

private:
  struct pending_handshake {
    unique_fd fd;
    std::string peer;
    /// The source address without the port (admission is per address).
    std::string addr;
    time_point deadline;
    std::array<uint8_t, wire::hello_size> buf{};
    size_t got = 0;
  };

  soft_listener(std::shared_ptr<soft_device> dev, unique_fd sock, uint16_t port,
                const conn_params& offer, event_fd wake);

  void take_connections(time_point now);
  /// Logs (within the shared "connections" budget) that `peer` was dropped.
  void warn_dropped(const std::string& peer, const std::string& why) const;
  /// Makes room for a new handshake from `addr` (see the class comment).
  void admit(const std::string& addr);
  /// Index of the handshake of `addr` to drop: its oldest silent one, else
  /// its oldest.
  size_t victim_of(const std::string& addr) const;
  /// Drops the handshake at `index`; with `why_code`, tells the client why.
  void drop(size_t index, const std::string& why,
            std::optional<wire::refusal> why_code = std::nullopt);
  std::optional<queue_pair_ptr> advance(size_t index);

  std::shared_ptr<soft_device> dev_;
  unique_fd sock_;
  uint16_t port_;
  conn_params offer_;
  event_fd wake_;
  std::atomic<bool> closed_{false};
  /// Handshakes in progress; touched by `accept` only.
  std::vector<pending_handshake> pending_;
  /// Set when accept4 ran out of descriptors: pause taking connections.
  std::optional<time_point> backoff_until_;
};

} // namespace rdmactor::transport::soft
