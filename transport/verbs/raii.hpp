#pragma once

#include <memory>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include "common/logging.hpp"

/// RAII owners for rdma-core objects (internal to the verbs fabric).
///
/// Each owner releases its object with the matching destroy call and logs a
/// failure instead of throwing.  Owners are declared in the order the
/// objects are created so that members are released in reverse order.
namespace rdmactor::transport::verbs {

namespace detail {

/// Logs a failed release call (rdma-core returns errno values or -1).
inline void log_release_failure(const char* what, int rc) noexcept {
  if (rc != 0)
    log().warn("verbs: {} failed (rc {}, errno {})", what, rc, errno);
}

} // namespace detail

/// Frees an `ibv_get_device_list` result.
struct device_list_deleter {
  void operator()(ibv_device** p) const noexcept {
    ibv_free_device_list(p);
  }
};
using device_list_ptr = std::unique_ptr<ibv_device*, device_list_deleter>;

/// Closes an `ibv_context`.
struct context_deleter {
  void operator()(ibv_context* p) const noexcept {
    detail::log_release_failure("ibv_close_device", ibv_close_device(p));
  }
};
using context_ptr = std::unique_ptr<ibv_context, context_deleter>;

/// Deallocates a protection domain.
struct pd_deleter {
  void operator()(ibv_pd* p) const noexcept {
    detail::log_release_failure("ibv_dealloc_pd", ibv_dealloc_pd(p));
  }
};
using pd_ptr = std::unique_ptr<ibv_pd, pd_deleter>;

/// Deregisters a memory region.
struct mr_deleter {
  void operator()(ibv_mr* p) const noexcept {
    detail::log_release_failure("ibv_dereg_mr", ibv_dereg_mr(p));
  }
};
using mr_ptr = std::unique_ptr<ibv_mr, mr_deleter>;

/// Destroys a completion channel.
struct comp_channel_deleter {
  void operator()(ibv_comp_channel* p) const noexcept {
    detail::log_release_failure("ibv_destroy_comp_channel",
                                ibv_destroy_comp_channel(p));
  }
};
using comp_channel_ptr
    = std::unique_ptr<ibv_comp_channel, comp_channel_deleter>;

/// Destroys a completion queue.
struct cq_deleter {
  void operator()(ibv_cq* p) const noexcept {
    detail::log_release_failure("ibv_destroy_cq", ibv_destroy_cq(p));
  }
};
using cq_ptr = std::unique_ptr<ibv_cq, cq_deleter>;

/// Destroys a shared receive queue (EBUSY while a queue pair still uses
/// it: destroy those first).  Not `srq_ptr`: that names the fabric's
/// `shared_ptr<shared_receive_queue>`.
struct srq_deleter {
  void operator()(ibv_srq* p) const noexcept {
    detail::log_release_failure("ibv_destroy_srq", ibv_destroy_srq(p));
  }
};
using ibv_srq_ptr = std::unique_ptr<ibv_srq, srq_deleter>;

/// Destroys a queue pair.
struct qp_deleter {
  void operator()(ibv_qp* p) const noexcept {
    detail::log_release_failure("ibv_destroy_qp", ibv_destroy_qp(p));
  }
};
using qp_ptr = std::unique_ptr<ibv_qp, qp_deleter>;

/// Destroys an rdma_cm event channel.
struct event_channel_deleter {
  void operator()(rdma_event_channel* p) const noexcept {
    rdma_destroy_event_channel(p);
  }
};
using event_channel_ptr
    = std::unique_ptr<rdma_event_channel, event_channel_deleter>;

/// Destroys an rdma_cm id (blocks until its events are acknowledged, which
/// this fabric always does promptly).
struct cm_id_deleter {
  void operator()(rdma_cm_id* p) const noexcept {
    detail::log_release_failure("rdma_destroy_id", rdma_destroy_id(p));
  }
};
using cm_id_ptr = std::unique_ptr<rdma_cm_id, cm_id_deleter>;

/// Acknowledges an rdma_cm event.
struct cm_event_deleter {
  void operator()(rdma_cm_event* p) const noexcept {
    detail::log_release_failure("rdma_ack_cm_event", rdma_ack_cm_event(p));
  }
};
using cm_event_ptr = std::unique_ptr<rdma_cm_event, cm_event_deleter>;

/// Owns a file descriptor (eventfd).
class unique_fd {
public:
  unique_fd() noexcept = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  unique_fd(unique_fd&& other) noexcept : fd_(other.fd_) {
    other.fd_ = -1;
  }
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.fd_;
      other.fd_ = -1;
    }
    return *this;
  }
  ~unique_fd() {
    reset();
  }

  int get() const noexcept {
    return fd_;
  }
  explicit operator bool() const noexcept {
    return fd_ >= 0;
  }
  void reset() noexcept {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

private:
  int fd_ = -1;
};

} // namespace rdmactor::transport::verbs
