#include "transport/verbs/verbs_listener.hpp"

#include <algorithm>
#include <cerrno>

#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "rdmactor/error.hpp"
#include "transport/verbs/handshake.hpp"
#include "transport/verbs/verbs_device.hpp"
#include "transport/verbs/verbs_queue_pair.hpp"

namespace rdmactor::transport::verbs {

namespace {

/// Connect requests rdma_cm queues while nobody accepts.
constexpr int listen_backlog = 64;

/// Accepted requests waiting for ESTABLISHED at most; a new one beyond it
/// drops the oldest (each holds a QP and its CQs).
constexpr size_t max_pending_handshakes = 64;

} // namespace

verbs_listener::verbs_listener(std::shared_ptr<verbs_device> dev,
                               const conn_params& offer)
    : dev_(std::move(dev)), offer_(offer) {}

verbs_listener::~verbs_listener() {
  // Pending QPs (and their cm ids) go before the listening id and channel.
  pending_.clear();
}

caf::expected<std::unique_ptr<verbs_listener>>
verbs_listener::create(std::shared_ptr<verbs_device> dev,
                       const std::string& host, uint16_t port,
                       const conn_params& offer) {
  auto where
      = (host.empty() ? std::string{"*"} : host) + ":" + std::to_string(port);
  auto addr = resolve_address(host, port, true);
  if (!addr)
    return std::move(addr.error());
  std::unique_ptr<verbs_listener> self{new verbs_listener(dev, offer)};
  self->channel_.reset(rdma_create_event_channel());
  if (!self->channel_ || !set_nonblocking(self->channel_->fd))
    return make_error(errc::connect_failed,
                      "rdma_create_event_channel failed: " + errno_text(errno));
  self->wake_fd_ = unique_fd{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  if (!self->wake_fd_)
    return make_error(errc::connect_failed,
                      "eventfd failed: " + errno_text(errno));
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(self->channel_.get(), &raw, nullptr, RDMA_PS_TCP) != 0)
    return make_error(errc::connect_failed,
                      "rdma_create_id failed: " + errno_text(errno));
  self->id_.reset(raw);
  if (rdma_bind_addr(raw, addr->get()) != 0) {
    auto err = errno;
    return make_error(
        errc::connect_failed,
        "cannot listen on " + where + ": rdma_bind_addr: " + errno_text(err)
            + (err == EADDRINUSE ? "; the port is taken, pick another or 0"
                                 : "; the address must belong to an RDMA "
                                   "interface (rdma link show)"));
  }
  // Bound to a specific address: rdma_cm knows the device now.
  if (raw->verbs != nullptr)
    if (auto err = dev->check_id(raw, "listen address " + where))
      return err;
  if (rdma_listen(raw, listen_backlog) != 0)
    return make_error(errc::connect_failed,
                      "rdma_listen on " + where
                          + " failed: " + errno_text(errno));
  self->port_ = ntohs(rdma_get_src_port(raw));
  log().debug("verbs: listening on {} (port {})", where, self->port_);
  return self;
}

uint16_t verbs_listener::port() const noexcept {
  return port_;
}

void verbs_listener::close() {
  if (closed_.exchange(true))
    return;
  uint64_t one = 1;
  if (::write(wake_fd_.get(), &one, sizeof(one)) < 0)
    log().error("verbs: cannot wake the listener: {}", errno_text(errno));
}

caf::expected<queue_pair_ptr>
verbs_listener::accept(std::chrono::milliseconds timeout) {
  auto deadline = clock::now() + timeout;
  for (;;) {
    if (closed_)
      return make_error(errc::closed, "the listener was closed");
    // Drop requests that never completed the handshake.
    auto now = clock::now();
    auto wake = deadline;
    for (auto i = pending_.begin(); i != pending_.end();) {
      if (i->deadline <= now) {
        warn_within("connections",
                    "verbs: " + to_string(rdma_get_peer_addr(i->qp->id()))
                        + " did not complete the connection in time; "
                          "dropped");
        i = pending_.erase(i);
      } else {
        wake = std::min(wake, i->deadline);
        ++i;
      }
    }
    if (now >= deadline)
      return make_error(errc::connect_timeout,
                        "no peer connected within "
                            + std::to_string(timeout.count()) + " ms");
    auto ev = next_event(channel_.get(), wake_fd_.get(), wake);
    if (!ev) {
      if (code_of(ev.error()) == errc::connect_timeout)
        continue; // a pending deadline or ours: checked above
      return std::move(ev.error());
    }
    if (ev->type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      on_request(*ev);
      continue;
    }
    if (ev->id == id_.get()) {
      if (ev->type == RDMA_CM_EVENT_DEVICE_REMOVAL)
        return make_error(errc::fabric_unavailable,
                          "the RDMA device was removed");
      log().debug("verbs: listener: {}", rdma_event_str(ev->type));
      continue;
    }
    auto i = std::find_if(pending_.begin(), pending_.end(),
                          [&](auto& p) { return p.qp->id() == ev->id; });
    if (i == pending_.end()) {
      log().debug("verbs: listener: {} for an unknown id ignored",
                  rdma_event_str(ev->type));
      continue;
    }
    if (ev->type != RDMA_CM_EVENT_ESTABLISHED) {
      warn_within("connections", "verbs: connection from "
                                     + to_string(rdma_get_peer_addr(ev->id))
                                     + " failed: " + rdma_event_str(ev->type)
                                     + " (status " + std::to_string(ev->status)
                                     + ")");
      pending_.erase(i);
      continue;
    }
    auto entry = std::move(*i);
    pending_.erase(i);
    if (auto err = entry.qp->establish(entry.negotiated)) {
      warn_within("connections",
                  "verbs: dropping a connection: " + what_of(err));
      continue;
    }
    return queue_pair_ptr{std::move(entry.qp)};
  }
}

void verbs_listener::reject(rdma_cm_id* id, errc reason,
                            const std::string& why) {
  warn_within("connections", "verbs: rejected a connection from "
                                 + to_string(rdma_get_peer_addr(id)) + ": "
                                 + why);
  auto refusal = encode_reject(reason);
  if (rdma_reject(id, refusal.data(), static_cast<uint8_t>(refusal.size()))
      != 0)
    log().debug("verbs: rdma_reject failed: {}", errno_text(errno));
}

void verbs_listener::on_request(const cm_event_info& ev) {
  // The request's id is ours from here on (the event is acknowledged).
  cm_id_ptr id{ev.id};
  if (closed_) {
    reject(id.get(), errc::closed, "the listener is closing");
    return;
  }
  if (auto err = dev_->check_id(id.get(), "the connection request")) {
    reject(id.get(), errc::device_not_found, what_of(err));
    return;
  }
  auto offer = decode_hello(ev.private_data.data(), ev.private_data_len,
                            hello_kind::offer);
  if (!offer || offer->kind != hello_kind::offer) {
    auto reason = offer ? errc::handshake_failed : code_of(offer.error());
    reject(id.get(), reason,
           offer ? std::string{"unexpected reject in a connect request"}
                 : what_of(offer.error()));
    return;
  }
  auto raw = id.get();
  auto qp = std::make_unique<verbs_queue_pair>(dev_, std::move(id));
  auto responder_resources
      = std::min(ev.initiator_depth, dev_->max_responder_resources());
  auto initiator_depth
      = std::min(ev.responder_resources, dev_->max_initiator_depth());
  auto err = qp->init(offer_);
  if (!err)
    err = qp->ready(responder_resources, initiator_depth);
  if (err) {
    reject(raw, errc::connect_failed, what_of(err));
    return;
  }
  auto answer = encode_hello(hello_kind::answer, offer_);
  rdma_conn_param param{};
  param.private_data = answer.data();
  param.private_data_len = static_cast<uint8_t>(answer.size());
  param.responder_resources = responder_resources;
  param.initiator_depth = initiator_depth;
  param.flow_control = 1;
  param.rnr_retry_count = dev_->rnr_retry();
  param.srq = qp->srq() ? 1 : 0;
  param.qp_num = qp->qp_num();
  if (rdma_accept(raw, &param) != 0) {
    warn_within("connections", "verbs: rdma_accept for "
                                   + to_string(rdma_get_peer_addr(raw))
                                   + " failed: " + errno_text(errno));
    return;
  }
  if (pending_.size() >= max_pending_handshakes) {
    warn_within("connections",
                "verbs: " + std::to_string(pending_.size())
                    + " unfinished connections; dropping the oldest from "
                    + to_string(rdma_get_peer_addr(pending_.front().qp->id())));
    pending_.erase(pending_.begin());
  }
  auto limit = std::chrono::milliseconds{dev_->opts().connect_timeout_ms};
  pending_.push_back(pending{std::move(qp), negotiate(offer_, offer->params),
                             clock::now() + limit});
}

} // namespace rdmactor::transport::verbs
