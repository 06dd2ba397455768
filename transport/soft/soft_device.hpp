#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rdmactor/options.hpp"
#include "rdmactor/transport/fabric.hpp"
#include "transport/soft/atomics.hpp"
#include "transport/soft/faults.hpp"
#include "transport/soft/protection_domain.hpp"
#include "transport/soft/soft_queue_pair.hpp"
#include "transport/soft/unique_fd.hpp"
#include "transport/soft/wire.hpp"

namespace rdmactor::transport::soft {

/// The soft device "soft0": one protection domain, the event loops that
/// serve every queue pair of the device (`engine_threads` of them, started
/// with the first queue pair), the options every connection of the device
/// uses (`rnr_timeout_ms`, `connect_timeout_ms`, `request_timeout_ms`) and
/// the fault plan for new queue pairs.  Thread-safe.  Queue pairs keep the
/// device alive, so its loops outlive them.
class soft_device final : public device {
public:
  explicit soft_device(const options& opts);

  const char* kind() const noexcept override {
    return "soft";
  }

  /// True: a polling owner reads its socket itself (`queue_pair::progress`)
  /// instead of waiting for the event loop to hand each completion over,
  /// which saves two thread hand-offs per round trip (docs/benchmarks.md,
  /// "The owner reads the socket").  Before it did, this was false: the
  /// loop that produced the completions ran on the cores a polling actor
  /// spun on.
  bool polling_pays() const noexcept override {
    return true;
  }

  std::string name() const override {
    return "soft0";
  }

  /// True: the device's `atomic_unit` executes inbound atomics.
  bool supports_atomics() const noexcept override {
    return true;
  }

  caf::expected<std::unique_ptr<memory_region>>
  register_memory(void* addr, size_t length, uint32_t access) override;

  caf::expected<std::unique_ptr<listener>>
  listen(const std::string& host, uint16_t port,
         const conn_params& offer) override;

  caf::expected<queue_pair_ptr>
  connect(const std::string& host, uint16_t port, const conn_params& offer,
          std::chrono::milliseconds timeout) override;

  /// A `soft_srq` of up to `max_wr` receives (at most
  /// `limits::max_srq_wr`).
  caf::expected<srq_ptr> create_srq(uint32_t max_wr) override;

  /// Returns the protection domain.
  protection_domain& pd() noexcept {
    return pd_;
  }

  /// Returns what executes the atomics peers send to this device (all its
  /// queue pairs share it).
  atomic_unit& atomics() noexcept {
    return atomics_;
  }

  /// Returns the options the device was opened with.
  const options& opts() const noexcept {
    return opts_;
  }

  /// Returns the hello this side sends with `offer`.
  wire::hello hello_for(const conn_params& offer) const noexcept;

  /// Starts a queue pair on a handshaken socket.
  caf::expected<queue_pair_ptr> start_queue_pair(unique_fd sock,
                                                 std::string peer,
                                                 const conn_params& params,
                                                 uint32_t peer_rnr_timeout_ms);

  /// Sets the fault plan of queue pairs created from now on.
  void set_faults(const fault_plan& plan);

  /// Returns how many event loop threads run (0 before the first queue
  /// pair).
  size_t engine_threads() const;

private:
  std::shared_ptr<soft_device> self();

  /// Returns the least loaded event loop, starting them on the first call.
  caf::expected<event_loop*> pick_loop();

  const options opts_;
  protection_domain pd_;
  atomic_unit atomics_;
  mutable std::mutex faults_mtx_;
  fault_plan faults_;
  mutable std::mutex loops_mtx_;
  std::vector<std::unique_ptr<event_loop>> loops_;
};

} // namespace rdmactor::transport::soft
