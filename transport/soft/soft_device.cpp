#include "transport/soft/soft_device.hpp"

#include <algorithm>

#include "rdmactor/error.hpp"
#include "transport/soft/handshake.hpp"
#include "transport/soft/limits.hpp"
#include "transport/soft/socket_ops.hpp"
#include "transport/soft/soft_listener.hpp"
#include "transport/soft/soft_memory_region.hpp"
#include "transport/soft/soft_srq.hpp"

namespace rdmactor::transport::soft {

// -- soft_memory_region -------------------------------------------------------

soft_memory_region::soft_memory_region(std::shared_ptr<soft_device> dev,
                                       registration_ptr reg)
    : memory_region(reg->base, reg->length, reg->lkey, reg->rkey, reg->access),
      dev_(std::move(dev)), reg_(std::move(reg)) {
  dev_->count_registration(length(), +1);
}

soft_memory_region::~soft_memory_region() {
  dev_->pd().remove(reg_);
  dev_->count_registration(length(), -1);
}

// -- soft_device
// ----------------------------------------------------------------

soft_device::soft_device(const options& opts) : opts_(opts) {
  // nop
}

std::shared_ptr<soft_device> soft_device::self() {
  return std::static_pointer_cast<soft_device>(shared_from_this());
}

caf::expected<std::unique_ptr<memory_region>>
soft_device::register_memory(void* addr, size_t length, uint32_t access) {
  auto reg = pd_.add(addr, length, access);
  if (!reg)
    return reg.error();
  return std::unique_ptr<memory_region>{
      new soft_memory_region(self(), std::move(*reg))};
}

caf::expected<std::unique_ptr<listener>>
soft_device::listen(const std::string& host, uint16_t port,
                    const conn_params& offer) {
  if (auto err = check_offer(offer))
    return err;
  auto sock = listen_tcp(host, port);
  if (!sock)
    return sock.error();
  return soft_listener::make(self(), std::move(sock->fd), sock->port, offer);
}

caf::expected<queue_pair_ptr>
soft_device::connect(const std::string& host, uint16_t port,
                     const conn_params& offer,
                     std::chrono::milliseconds timeout) {
  if (auto err = check_offer(offer))
    return err;
  auto deadline = clock_type::now() + timeout;
  auto sock = connect_tcp(host, port, deadline);
  if (!sock)
    return sock.error();
  auto peer = peer_name_of(sock->get());
  auto hs
      = client_handshake(sock->get(), hello_for(offer), offer, deadline, peer);
  if (!hs)
    return hs.error();
  return start_queue_pair(std::move(*sock), std::move(peer), hs->params,
                          hs->peer_rnr_timeout_ms);
}

wire::hello soft_device::hello_for(const conn_params& offer) const noexcept {
  wire::hello h;
  h.max_message_len_bytes = offer.max_message_len_bytes;
  h.recv_depth = offer.recv_depth;
  h.rnr_timeout_ms = opts_.rnr_timeout_ms;
  return h;
}

caf::expected<queue_pair_ptr>
soft_device::start_queue_pair(unique_fd sock, std::string peer,
                              const conn_params& params,
                              uint32_t peer_rnr_timeout_ms) {
  soft_queue_pair::config cfg;
  cfg.params = params;
  cfg.peer = std::move(peer);
  cfg.rnr_timeout = std::chrono::milliseconds{opts_.rnr_timeout_ms};
  // A peer waiting for a receive answers nothing for up to its RNR
  // timeout; only silence beyond that (plus the request timeout) counts.
  auto peer_rnr = std::min(peer_rnr_timeout_ms, limits::max_peer_timeout_ms);
  cfg.transport_timeout = std::chrono::milliseconds{
      uint64_t{opts_.request_timeout_ms} + peer_rnr};
  {
    std::lock_guard<std::mutex> guard{faults_mtx_};
    cfg.faults = faults_;
  }
  if (auto shared = srq();
      shared && params.max_message_len_bytes <= shared->receive_bytes())
    cfg.srq = std::dynamic_pointer_cast<soft_srq>(std::move(shared));
  auto loop = pick_loop();
  if (!loop)
    return loop.error();
  return soft_queue_pair::make(self(), **loop, std::move(sock), std::move(cfg));
}

caf::expected<srq_ptr> soft_device::create_srq(uint32_t max_wr) {
  if (max_wr == 0 || max_wr > limits::max_srq_wr)
    return make_error(errc::invalid_argument,
                      "a soft shared receive queue holds 1 to "
                          + std::to_string(limits::max_srq_wr)
                          + " receives; asked for " + std::to_string(max_wr));
  return std::make_shared<soft_srq>(self(), max_wr);
}

caf::expected<event_loop*> soft_device::pick_loop() {
  std::lock_guard<std::mutex> guard{loops_mtx_};
  if (loops_.empty()) {
    auto n = std::max<uint32_t>(opts_.engine_threads, 1);
    for (uint32_t i = 0; i < n; ++i) {
      auto loop = event_loop::make();
      if (!loop)
        return loop.error();
      loops_.push_back(std::move(*loop));
    }
  }
  // The least loaded loop; ties go to the first.
  auto* best = loops_.front().get();
  auto best_n = best->attached();
  for (auto& loop : loops_) {
    auto n = loop->attached();
    if (n < best_n) {
      best = loop.get();
      best_n = n;
    }
  }
  return best;
}

size_t soft_device::engine_threads() const {
  std::lock_guard<std::mutex> guard{loops_mtx_};
  return loops_.size();
}

void soft_device::set_faults(const fault_plan& plan) {
  std::lock_guard<std::mutex> guard{faults_mtx_};
  faults_ = plan;
}

} // namespace rdmactor::transport::soft
