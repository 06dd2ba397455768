#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <rdma/rdma_cma.h>

#include "rdmactor/transport/fabric.hpp"
#include "transport/verbs/cm.hpp"
#include "transport/verbs/raii.hpp"

namespace rdmactor::transport::verbs {

class verbs_device;
class verbs_queue_pair;

/// A listening rdma_cm id with its own event channel (internal).
///
/// `accept` handles the channel's events on the calling thread: a connect
/// request is validated (device, private data), answered with a QP in RTS
/// and `rdma_accept`, and kept pending until rdma_cm reports it established
/// (or it fails, or `connect_timeout_ms` passes).  Requests that fail the
/// handshake are rejected with a reason in the reject private data.
class verbs_listener final : public listener {
public:
  /// Binds to `host:port` and listens.
  static caf::expected<std::unique_ptr<verbs_listener>>
  create(std::shared_ptr<verbs_device> dev, const std::string& host,
         uint16_t port, const conn_params& offer);

  ~verbs_listener() override;

  verbs_listener(const verbs_listener&) = delete;
  verbs_listener& operator=(const verbs_listener&) = delete;

  uint16_t port() const noexcept override;

  caf::expected<queue_pair_ptr>
  accept(std::chrono::milliseconds timeout) override;

  void close() override;

private:
  /// An accepted request waiting for RDMA_CM_EVENT_ESTABLISHED.
  struct pending {
    std::unique_ptr<verbs_queue_pair> qp;
    conn_params negotiated;
    clock::time_point deadline;
  };

  verbs_listener(std::shared_ptr<verbs_device> dev, const conn_params& offer);

  /// Validates and answers a connect request; rejects it on failure.
  void on_request(const cm_event_info& ev);

  /// Rejects the request on `id` with `reason` and destroys the id.
  void reject(rdma_cm_id* id, errc reason, const std::string& why);

  // Members in order of acquisition; released in reverse.
  std::shared_ptr<verbs_device> dev_;
  conn_params offer_;
  event_channel_ptr channel_;
  unique_fd wake_fd_;
  cm_id_ptr id_;
  uint16_t port_ = 0;
  std::vector<pending> pending_;
  std::atomic<bool> closed_{false};
};

} // namespace rdmactor::transport::verbs
