#pragma once

#include <cstdint>
#include <memory>

#include <infiniband/verbs.h>

#include "rdmactor/transport/fabric.hpp"
#include "transport/verbs/raii.hpp"

namespace rdmactor::transport::verbs {

class verbs_device;

/// A shared receive queue on a verbs device (`ibv_create_srq`; internal,
/// made by `verbs_device::create_srq`).
///
/// The queue pairs the device makes while it shares the queue
/// (`device::share_receives`) are created with it (`ibv_qp_init_attr::srq`)
/// and hold it, so it is destroyed after the last of them; it holds its
/// device (the protection domain) in turn.  `post_recv` calls
/// `ibv_post_srq_recv`, which the provider serializes itself: any thread
/// may post.
///
/// A queue pair that enters the error state leaves the receives it did not
/// take here (IBA: one it took for a message that had begun to arrive
/// completes in its CQ with an error status) and flushes none.
class verbs_srq final : public shared_receive_queue {
public:
  /// Creates a queue of at least `max_wr` receives on `dev`.  Fails with
  /// `unsupported` where the device has no shared receive queue,
  /// `invalid_argument` for `max_wr` outside 1..`max_srq_wr` of the device.
  static caf::expected<std::shared_ptr<verbs_srq>>
  create(std::shared_ptr<verbs_device> dev, uint32_t max_wr);

  ~verbs_srq() override;

  verbs_srq(const verbs_srq&) = delete;
  verbs_srq& operator=(const verbs_srq&) = delete;

  /// Posts with `ibv_post_srq_recv`.  Fails with `invalid_argument` for more
  /// scatter/gather elements than the queue takes (`max_sge`, fewer where
  /// the device allows fewer), `quota_exceeded` when the queue is full.
  caf::error post_recv(uint64_t wr_id, const sge* sg, size_t n) override;

  /// The receives the device made room for (`ibv_query_srq`): at least
  /// the `max_wr` asked for (rdma_rxe rounds up to a power of two, less
  /// one: 4 makes 7, 16384 makes 32767).
  uint32_t max_wr() const noexcept override {
    return max_wr_;
  }

  /// The verbs object, for `ibv_qp_init_attr::srq`.
  ibv_srq* get() const noexcept {
    return srq_.get();
  }

  /// Whether `dev` created this queue (a queue pair takes receives only
  /// from a queue of its own protection domain).
  bool made_by(const verbs_device* dev) const noexcept {
    return dev_.get() == dev;
  }

private:
  verbs_srq(std::shared_ptr<verbs_device> dev, ibv_srq_ptr srq, uint32_t max_wr,
            uint32_t max_sge) noexcept;

  // Members in order of acquisition; released in reverse.
  std::shared_ptr<verbs_device> dev_;
  ibv_srq_ptr srq_;
  uint32_t max_wr_;
  uint32_t max_sge_;
};

} // namespace rdmactor::transport::verbs
