#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "transport/fabric.hpp"
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
/// parameters, that close, or that stay silent are logged (one line) and
/// dropped; `accept` keeps waiting.  At most
/// `limits::max_pending_handshakes` run at once (a new one drops the
/// oldest).  Handshakes in progress when `accept` returns continue in the
/// next call.
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
    time_point deadline;
    std::array<uint8_t, wire::hello_size> buf{};
    size_t got = 0;
  };

  soft_listener(std::shared_ptr<soft_device> dev, unique_fd sock, uint16_t port,
                const conn_params& offer, event_fd wake);

  void take_connections(time_point now);
  void drop(size_t index, const std::string& why);
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
