#include "rdmactor/node.hpp"

#include <chrono>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/sec.hpp>

#include "actors/node_core.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor {

namespace {

/// Slack on top of the node's own timeouts for a blocking call: the node
/// actor answers within its timeouts unless the scheduler is starved.
constexpr auto call_slack = std::chrono::seconds{10};

caf::error closed_error() {
  return make_error(errc::closed, "the node was closed; open a new node");
}

/// Sends `xs...` to the node actor and waits for the answer, at most
/// `timeout`.  Errors that are not rdmactor's (CAF's own request timeout,
/// a dead actor) are translated into rdmactor errors.
template <class T, class... Ts>
caf::expected<T> ask(caf::actor_system& sys, const node_actor& hdl,
                     std::chrono::milliseconds timeout, Ts&&... xs) {
  if (!hdl)
    return closed_error();
  caf::scoped_actor self{sys, true};
  caf::expected<T> result{closed_error()};
  self->request(hdl, timeout, std::forward<Ts>(xs)...)
      .receive([&](T& x) { result = std::move(x); },
               [&](caf::error& err) { result = std::move(err); });
  if (!result && result.error().category() != caf::atom("rdmactor")) {
    if (result.error() == caf::sec::request_timeout)
      return make_error(errc::request_timeout,
                        "the node actor did not answer within "
                            + std::to_string(timeout.count())
                            + " ms; the CAF scheduler may be starved");
    return closed_error();
  }
  return result;
}

} // namespace

caf::expected<std::unique_ptr<node>> node::open(caf::actor_system& sys,
                                                options opts) {
  auto core = node_core::open(sys, std::move(opts));
  if (!core)
    return std::move(core.error());
  auto hdl = spawn_node_actor(sys, *core);
  return std::unique_ptr<node>{new node(sys, std::move(*core), std::move(hdl))};
}

node::node(caf::actor_system& sys, std::shared_ptr<node_core> core,
           node_actor hdl)
    : sys_(sys), core_(std::move(core)), hdl_(std::move(hdl)) {
  // nop
}

node::~node() {
  close();
}

caf::expected<connection_actor> node::connect(const std::string& host_port) {
  if (core_->closing()) // the actor system may be gone: do not touch it
    return closed_error();
  auto timeout = std::chrono::milliseconds{core_->opts().connect_timeout_ms}
                 + call_slack;
  auto hdl = actor();
  if (!hdl)
    return closed_error();
  return ask<connection_actor>(sys_, hdl, timeout, connect_atom::value,
                               host_port);
}

caf::expected<uint16_t> node::listen(const std::string& host_port,
                                     acceptor_actor acceptor) {
  if (core_->closing())
    return closed_error();
  auto timeout = std::chrono::milliseconds{core_->opts().request_timeout_ms}
                 + call_slack;
  auto hdl = actor();
  if (!hdl)
    return closed_error();
  return ask<uint16_t>(sys_, hdl, timeout, listen_atom::value, host_port,
                       std::move(acceptor));
}

caf::expected<uint16_t> node::listen(const std::string& host_port,
                                     caf::actor handler) {
  return listen(host_port, caf::actor_cast<acceptor_actor>(std::move(handler)));
}

caf::expected<bool> node::publish(const std::string& name, caf::actor actor) {
  return core_->publish(name, std::move(actor));
}

bool node::unpublish(const std::string& name) {
  return core_->unpublish(name);
}

const allocator_actor& node::allocator() const noexcept {
  return core_->allocator();
}

allocator_stats node::memory_stats() const {
  return core_->memory_stats();
}

const memory_pool_ptr& node::pool() const noexcept {
  return core_->pool();
}

const options& node::opts() const noexcept {
  return core_->opts();
}

const transport::device_ptr& node::device() const noexcept {
  return core_->device();
}

bool node::closed() const noexcept {
  return core_->closing();
}

void node::close() {
  node_actor hdl;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    hdl = std::move(hdl_);
    hdl_ = nullptr;
  }
  if (!hdl)
    return;
  // Closed by the system's shutdown (or through the actor): the actor is
  // gone or going, and the actor system may be gone too; touch neither.
  if (core_->closing())
    return;
  auto timeout
      = std::chrono::milliseconds{core_->opts().close_timeout_ms} + call_slack;
  if (!ask<bool>(sys_, hdl, timeout, close_atom::value))
    core_->close(); // the actor did not answer: close here
}

} // namespace rdmactor
