#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rdmactor/options.hpp"
#include "rdmactor/transport/fabric.hpp"
#include "transport/verbs/completion_engine.hpp"
#include "transport/verbs/raii.hpp"

namespace rdmactor::transport::verbs {

class verbs_queue_pair;

/// An opened verbs device: context, protection domain, the chosen port and
/// GID, one event thread and one completion engine (internal; use
/// `open_device`).  Both threads start at `open`; a process has two
/// threads per opened device, however many connections it makes.
///
/// The completion engine (`completion_engine`) owns the one completion
/// channel that the CQs of every queue pair are created on and calls the
/// queue pairs' notify functions.
///
/// The event thread drains two sources and turns them into QP error state:
/// the rdma_cm event channel that every established connection is migrated
/// to (DISCONNECTED, DEVICE_REMOVAL), and the context's asynchronous events
/// (`ibv_get_async_event`: QP fatal, CQ error, port down, device fatal).  It
/// handles an event before acknowledging it, under the registry lock, so a
/// queue pair that deregistered itself never sees an event and
/// `rdma_destroy_id`/`ibv_destroy_qp` never wait on an unacknowledged one.
class verbs_device final : public device {
public:
  /// Opens the device, port and GID that `opts` select.
  static caf::expected<std::shared_ptr<verbs_device>> open(const options& opts);

  ~verbs_device() override;

  verbs_device(const verbs_device&) = delete;
  verbs_device& operator=(const verbs_device&) = delete;

  // -- device interface -----------------------------------------------------

  const char* kind() const noexcept override;

  std::string name() const override;

  caf::expected<std::unique_ptr<memory_region>>
  register_memory(void* addr, size_t length, uint32_t access) override;

  caf::expected<std::unique_ptr<listener>>
  listen(const std::string& host, uint16_t port,
         const conn_params& offer) override;

  caf::expected<queue_pair_ptr>
  connect(const std::string& host, uint16_t port, const conn_params& offer,
          std::chrono::milliseconds timeout) override;

  /// A `verbs_srq` (`ibv_create_srq` on the protection domain) of at least
  /// `max_wr` receives, at most the device's `max_srq_wr`; `unsupported`
  /// where `max_srq` is 0.  Defined in verbs_srq.cpp.
  caf::expected<srq_ptr> create_srq(uint32_t max_wr) override;

  // -- internal interface of queue pairs and listeners ----------------------

  /// Returns a shared pointer to this device.
  std::shared_ptr<verbs_device> self();

  const options& opts() const noexcept {
    return opts_;
  }
  ibv_context* context() const noexcept {
    return ctx_.get();
  }
  ibv_pd* pd() const noexcept {
    return pd_.get();
  }
  const ibv_device_attr& attr() const noexcept {
    return attr_;
  }
  uint8_t port_num() const noexcept {
    return port_num_;
  }
  ibv_mtu mtu() const noexcept {
    return mtu_;
  }
  /// True for Soft-RoCE (rdma_rxe reports vendor id 0xFFFFFF).
  bool is_soft_roce() const noexcept {
    return attr_.vendor_id == 0xFFFFFF;
  }
  bool is_ethernet() const noexcept {
    return link_layer_ == IBV_LINK_LAYER_ETHERNET;
  }
  rdma_event_channel* cm_channel() const noexcept {
    return cm_channel_.get();
  }
  /// Largest message of one work request (the port's max_msg_sz).
  uint64_t max_msg_bytes() const noexcept {
    return max_msg_bytes_;
  }

  uint64_t max_wr_bytes() const noexcept override {
    return max_msg_bytes_;
  }

  /// True unless the device's atomic_cap is IBV_ATOMIC_NONE (rxe: GLOB).
  bool supports_atomics() const noexcept override {
    return attr_.atomic_cap != IBV_ATOMIC_NONE;
  }
  /// RNR retry count and the RNR NAK timer code we advertise.
  uint8_t rnr_retry() const noexcept {
    return rnr_retry_;
  }
  uint8_t min_rnr_timer() const noexcept {
    return min_rnr_timer_;
  }

  /// Largest RDMA READ initiator depth / responder resources to negotiate.
  uint8_t max_initiator_depth() const noexcept;
  uint8_t max_responder_resources() const noexcept;

  /// Checks that rdma_cm put `id` on this device and port; `device_not_found`
  /// otherwise (the address belongs to another RDMA device).
  caf::error check_id(rdma_cm_id* id, const std::string& what) const;

  /// Checks `offer` against the device limits (queue depths, message size).
  caf::error check_offer(const conn_params& offer) const;

  /// Returns the source GID index for a QP whose rdma_cm attributes name
  /// `cm_index`: the configured index, else a RoCE v2 entry holding the same
  /// GID (the IPv4-mapped address on Ethernet), else `cm_index`.
  uint8_t sgid_index(uint8_t cm_index) const;

  /// The completion engine: its channel for `ibv_create_cq`, its registry
  /// for the notify functions.
  completion_engine& engine() const noexcept {
    return *engine_;
  }

  /// Registers `qp` for the events of its cm id, QP and CQs.
  void add(verbs_queue_pair* qp);

  /// Deregisters `qp`; after return the event thread no longer touches it.
  void remove(verbs_queue_pair* qp);

private:
  verbs_device() = default;

  /// Body of the event thread.
  void run_events();

  void handle_cm_event(const rdma_cm_event& ev);
  void handle_async_event(const ibv_async_event& ev);

  // Members in order of acquisition; released in reverse.
  options opts_;
  std::string name_;
  context_ptr ctx_;
  ibv_device_attr attr_{};
  uint8_t port_num_ = 0;
  uint8_t link_layer_ = IBV_LINK_LAYER_UNSPECIFIED;
  ibv_mtu mtu_ = IBV_MTU_1024;
  int gid_index_ = -1; ///< configured GID index, -1: automatic
  uint64_t max_msg_bytes_ = 0;
  uint8_t rnr_retry_ = 0;
  uint8_t min_rnr_timer_ = 1;
  pd_ptr pd_;
  /// Destroyed after every CQ: each queue pair keeps the device alive.
  std::unique_ptr<completion_engine> engine_;
  event_channel_ptr cm_channel_;
  unique_fd stop_fd_;
  std::mutex mtx_;
  std::vector<verbs_queue_pair*> qps_; ///< guarded by mtx_
  std::thread thread_;
};

} // namespace rdmactor::transport::verbs
