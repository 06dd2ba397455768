#include "apps/bench/raw_link.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include "apps/bench/run_channel.hpp"
#include "common/logging.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor::bench {

namespace {

constexpr auto raw_timeout = std::chrono::seconds(30);

caf::behavior raw_echo_impl(caf::event_based_actor* self,
                            transport::transport_actor transport) {
  auto sub = caf::actor_cast<transport::transport_subscriber>(self);
  self->request(transport, raw_timeout, transport::subscribe_atom::value, sub)
      .then([](transport::link_params&) {},
            [self](caf::error&) { self->quit(); });
  return {
      [self, transport](transport::recv_atom, local_mr& msg) {
        if (msg.size() < raw_header_bytes || msg.data()[0] != echo_flag)
          return;
        std::vector<uint8_t> header(msg.data(), msg.data() + raw_header_bytes);
        local_mr payload;
        if (msg.size() > raw_header_bytes)
          payload = *msg.slice(raw_header_bytes, msg.size() - raw_header_bytes);
        // The transport answers every send, or fails it when the link
        // goes down (no_caf_timeout).
        self->request(transport, no_caf_timeout, transport::send_atom::value,
                      std::move(header), std::move(payload))
            .then([](uint64_t) {}, [self](caf::error&) { self->quit(); });
      },
      [self](transport::qp_down_atom, caf::error&) { self->quit(); },
  };
}

} // namespace

caf::expected<transport::transport_actor>
raw_connect(caf::actor_system& sys, const transport::device_ptr& dev,
            const std::string& host_port, const transport::conn_params& offer,
            std::chrono::milliseconds timeout, transport::polling how) {
  auto addr = transport::parse_address(host_port);
  if (!addr)
    return std::move(addr.error());
  auto qp = dev->connect(addr->first, addr->second, offer, timeout);
  if (!qp)
    return std::move(qp.error());
  return transport::spawn_transport(sys, dev, std::move(*qp), how);
}

raw_listener::~raw_listener() {
  stop();
}

caf::expected<uint16_t> raw_listener::start(caf::actor_system& sys,
                                            transport::device_ptr dev,
                                            const std::string& host_port,
                                            const transport::conn_params& offer,
                                            transport::polling how) {
  auto addr = transport::parse_address(host_port);
  if (!addr)
    return std::move(addr.error());
  auto lst = dev->listen(addr->first, addr->second, offer);
  if (!lst)
    return std::move(lst.error());
  dev_ = std::move(dev);
  how_ = how;
  listener_ = std::move(*lst);
  thread_ = std::thread([this, s = &sys] { run(s); });
  return listener_->port();
}

void raw_listener::run(caf::actor_system* sys) {
  while (!stopping_) {
    auto qp = listener_->accept(std::chrono::milliseconds{500});
    if (stopping_)
      return;
    if (!qp) {
      auto code = code_of(qp.error());
      if (code == errc::closed)
        return;
      if (code != errc::connect_timeout)
        log().warn("raw accept failed: {}", render(qp.error()));
      continue;
    }
    auto transport
        = transport::spawn_transport(*sys, dev_, std::move(*qp), how_);
    spawn_raw_echo(*sys, transport);
    std::lock_guard<std::mutex> guard{mtx_};
    transports_.push_back(std::move(transport));
  }
}

void raw_listener::stop() {
  if (stopping_.exchange(true))
    return;
  if (listener_)
    listener_->close();
  if (thread_.joinable())
    thread_.join();
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& t : transports_)
    caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
  transports_.clear();
}

caf::actor spawn_raw_echo(caf::actor_system& sys,
                          transport::transport_actor transport) {
  return sys.spawn(raw_echo_impl, std::move(transport));
}

} // namespace rdmactor::bench
