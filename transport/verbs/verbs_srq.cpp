#include "transport/verbs/verbs_srq.hpp"

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

#include "rdmactor/error.hpp"
#include "transport/verbs/cm.hpp"
#include "transport/verbs/verbs_device.hpp"
#include "transport/verbs/verbs_queue_pair.hpp"

namespace rdmactor::transport::verbs {

namespace {

/// The error of an `ibv_create_srq` that failed with `err`.
caf::error create_failed(const verbs_device& dev, uint32_t max_wr, int err) {
  auto what = "ibv_create_srq on " + dev.name() + " (" + std::to_string(max_wr)
              + " receives) failed: " + errno_text(err);
  if (err == ENOMEM)
    return make_error(errc::quota_exceeded,
                      what
                          + "; the device is out of shared receive queues "
                            "(max_srq "
                          + std::to_string(dev.attr().max_srq)
                          + ") or memory: lower srq-max-receives");
  if (err == EOPNOTSUPP || err == ENOSYS)
    return make_error(errc::unsupported,
                      what + "; set shared-receive-queue=false");
  return make_error(errc::fabric_unavailable, what);
}

} // namespace

caf::expected<std::shared_ptr<verbs_srq>>
verbs_srq::create(std::shared_ptr<verbs_device> dev, uint32_t max_wr) {
  auto& attr = dev->attr();
  if (attr.max_srq <= 0 || attr.max_srq_wr <= 0)
    return make_error(errc::unsupported,
                      dev->name()
                          + " has no shared receive queue (max_srq is 0); "
                            "set shared-receive-queue=false");
  auto limit = static_cast<uint32_t>(attr.max_srq_wr);
  if (max_wr == 0 || max_wr > limit)
    return make_error(
        errc::invalid_argument,
        "a shared receive queue on " + dev->name() + " holds 1 to "
            + std::to_string(limit) + " receives (its max_srq_wr); asked for "
            + std::to_string(max_wr) + "; set srq-max-receives to at most "
            + std::to_string(limit));
  ibv_srq_init_attr init{};
  init.attr.max_wr = max_wr;
  init.attr.max_sge = static_cast<uint32_t>(
      std::clamp<int>(attr.max_srq_sge, 1, static_cast<int>(max_sge)));
  init.attr.srq_limit = 0; // no IBV_EVENT_SRQ_LIMIT_REACHED
  ibv_srq_ptr srq{ibv_create_srq(dev->pd(), &init)};
  if (!srq)
    return create_failed(*dev, max_wr, errno);
  // What the device made room for, at least what we asked: some round up
  // without saying so in `init` (rdma_rxe: to a power of two, less one;
  // ibv_query_srq tells).
  auto made = init.attr;
  if (ibv_query_srq(srq.get(), &made) != 0)
    made = init.attr;
  auto made_wr = std::max(made.max_wr, max_wr);
  auto made_sge = std::clamp<uint32_t>(made.max_sge, 1, max_sge);
  return std::shared_ptr<verbs_srq>{
      new verbs_srq(std::move(dev), std::move(srq), made_wr, made_sge)};
}

verbs_srq::verbs_srq(std::shared_ptr<verbs_device> dev, ibv_srq_ptr srq,
                     uint32_t max_wr, uint32_t max_sge) noexcept
    : dev_(std::move(dev)), srq_(std::move(srq)), max_wr_(max_wr),
      max_sge_(max_sge) {}

verbs_srq::~verbs_srq() {
  // Every queue pair created with the queue holds it: none is left.
  srq_.reset();
  // The last holder may go inside a notify function, on the completion
  // engine's thread, which the device's destructor joins.
  auto& engine = dev_->engine();
  engine.release(std::move(dev_));
}

caf::error verbs_srq::post_recv(uint64_t wr_id, const sge* sg, size_t n) {
  if (n > max_sge_)
    return make_error(errc::invalid_argument,
                      "a receive of the shared receive queue on " + dev_->name()
                          + " takes at most " + std::to_string(max_sge_)
                          + " scatter/gather elements (got " + std::to_string(n)
                          + ")");
  if (n > 0 && sg == nullptr)
    return make_error(errc::invalid_argument, "null scatter/gather list");
  ibv_sge list[max_sge];
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = list;
  wr.num_sge = to_ibv_sges(sg, n, list);
  ibv_recv_wr* bad = nullptr;
  if (auto rc = ibv_post_srq_recv(srq_.get(), &wr, &bad))
    return make_error(
        rc == ENOMEM   ? errc::quota_exceeded
        : rc == EINVAL ? errc::invalid_argument
                       : errc::qp_error,
        "ibv_post_srq_recv on " + dev_->name() + " failed: " + errno_text(rc)
            + (rc == ENOMEM
                   ? "; the shared receive queue is full ("
                         + std::to_string(max_wr_) + " receives posted)"
                   : ""));
  return {};
}

// Here rather than in verbs_device.cpp: the queue's one place.
caf::expected<srq_ptr> verbs_device::create_srq(uint32_t max_wr) {
  auto srq = verbs_srq::create(self(), max_wr);
  if (!srq)
    return std::move(srq.error());
  return srq_ptr{std::move(*srq)};
}

} // namespace rdmactor::transport::verbs
