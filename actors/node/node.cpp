#include "rdmactor/node.hpp"

#include <chrono>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>

#include "actors/node/node_core.hpp"
#include "common/logging.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor {

namespace {

/// Slack on top of the node's own timeouts for a blocking call: the node
/// actor answers within its timeouts unless the scheduler is starved.
constexpr auto call_slack = std::chrono::seconds{10};

/// Sends `xs...` to the node actor and waits for the answer, at most
/// `timeout`.  Errors that are not rdmactor's (CAF's own request timeout,
/// a dead actor) are translated into rdmactor errors.
template <class T, class... Ts>
caf::expected<T> ask(caf::actor_system& sys, const node_actor& hdl,
                     std::chrono::milliseconds timeout, Ts&&... xs) {
  if (!hdl)
    return node_core::closed_error();
  caf::scoped_actor self{sys, true};
  caf::expected<T> result{node_core::closed_error()};
  self->request(hdl, timeout, std::forward<Ts>(xs)...)
      .receive([&](T& x) { result = std::move(x); },
               [&](caf::error& err) { result = std::move(err); });
  if (!result && result.error().category() != caf::atom("rdmactor")) {
    if (result.error() == caf::sec::request_timeout)
      return make_error(errc::request_timeout,
                        "the node actor did not answer within "
                            + std::to_string(timeout.count())
                            + " ms; the CAF scheduler may be starved");
    return node_core::closed_error();
  }
  return result;
}

/// Keeps the connections a `listen` without acceptor accepted, each until
/// it ends; quits with the node actor (whoever closed the node).
caf::behavior connection_keeper(caf::event_based_actor* self, node_actor node) {
  auto kept = std::make_shared<std::map<caf::actor_addr, connection_actor>>();
  auto node_addr = node.address();
  self->monitor(node);
  self->set_down_handler([self, kept, node_addr](caf::down_msg& msg) {
    if (msg.source == node_addr)
      self->quit();
    else
      kept->erase(msg.source);
  });
  return {
      [self, kept](accepted_atom, connection_actor& conn) {
        self->monitor(conn);
        kept->emplace(conn.address(), std::move(conn));
      },
  };
}

/// Whether `err` says that a kept connection ended (then `remote_actor`
/// connects again).
bool connection_ended(const caf::error& err) {
  if (err.category() == caf::atom("rdmactor"))
    return err.code() == static_cast<uint8_t>(errc::peer_gone)
           || err.code() == static_cast<uint8_t>(errc::closed)
           || err.code() == static_cast<uint8_t>(errc::peer_closed);
  return err == caf::sec::request_receiver_down;
}

} // namespace

caf::expected<std::unique_ptr<node>> node::open(caf::actor_system& sys,
                                                options opts) {
  auto core = node_core::open(sys, std::move(opts));
  if (!core)
    return std::move(core.error());
  if (!sys.node())
    log().warn("this actor system has no node id (its config loads no "
               "rdmactor::system_hook): remote actors cannot tell a peer's "
               "actor handles from this node's; use rdmactor::config, or "
               "cfg.load<rdmactor::system_hook>()");
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
  // On the calling thread, straight into the node's machinery: the actor
  // path (a request, a detached helper thread per connect, a scoped actor
  // to wait) cost a thread's creation and teardown per connection (with
  // 10,000 connects from 16 threads, perf put a third of the client's CPU
  // in clone, madvise and the TLB shootdowns of the helpers' stacks).
  // node_core::connect is thread-safe and bounded by connect_timeout_ms.
  if (core_->closing()) // the actor system may be gone: do not touch it
    return node_core::closed_error();
  return core_->connect(host_port);
}

caf::expected<uint16_t> node::listen(const std::string& host_port,
                                     acceptor_actor acceptor) {
  if (core_->closing())
    return node_core::closed_error();
  auto timeout = std::chrono::milliseconds{core_->opts().request_timeout_ms}
                 + call_slack;
  auto hdl = actor();
  if (!hdl)
    return node_core::closed_error();
  return ask<uint16_t>(sys_, hdl, timeout, listen_atom::value, host_port,
                       std::move(acceptor));
}

caf::expected<uint16_t> node::listen(const std::string& host_port,
                                     caf::actor handler) {
  return listen(host_port, caf::actor_cast<acceptor_actor>(std::move(handler)));
}

caf::expected<uint16_t> node::listen(const std::string& host_port) {
  caf::actor keeper;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!hdl_)
      return node_core::closed_error();
    if (!keeper_)
      keeper_ = sys_.spawn<caf::hidden>(connection_keeper, hdl_);
    keeper = keeper_;
  }
  return listen(host_port, keeper);
}

caf::expected<caf::actor> node::remote_actor(const std::string& host_port,
                                             const std::string& name) {
  return lookup_remote(host_port, name, {});
}

caf::expected<caf::actor>
node::lookup_remote(const std::string& host_port, const std::string& name,
                    std::vector<std::string> interface) {
  auto timeout = std::chrono::milliseconds{core_->opts().request_timeout_ms}
                 + call_slack;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (core_->closing())
      return node_core::closed_error();
    connection_actor conn;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      auto i = remote_conns_.find(host_port);
      if (i != remote_conns_.end())
        conn = i->second;
    }
    bool fresh = false;
    if (!conn) {
      auto made = connect(host_port);
      if (!made)
        return std::move(made.error());
      conn = std::move(*made);
      fresh = true;
      std::lock_guard<std::mutex> guard{mtx_};
      if (!hdl_)
        return node_core::closed_error();
      remote_conns_[host_port] = conn;
    }
    caf::scoped_actor self{sys_, true};
    caf::expected<caf::actor> result{node_core::closed_error()};
    auto on_value = [&](caf::actor& x) { result = std::move(x); };
    auto on_error = [&](caf::error& err) { result = std::move(err); };
    if (interface.empty())
      self->request(conn, timeout, lookup_atom_v, name)
          .receive(on_value, on_error);
    else
      self->request(conn, timeout, lookup_atom_v, name, interface)
          .receive(on_value, on_error);
    if (result || fresh || !connection_ended(result.error()))
      return result;
    // The kept connection ended meanwhile: forget it, connect once more.
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = remote_conns_.find(host_port);
    if (i != remote_conns_.end() && i->second == conn)
      remote_conns_.erase(i);
  }
  return node_core::closed_error();
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

uint64_t node::shared_receive_bytes() const noexcept {
  return core_->shared_receive_bytes();
}

bool node::closed() const noexcept {
  return core_->closing();
}

void node::close() {
  node_actor hdl;
  std::map<std::string, connection_actor> conns;
  caf::actor keeper;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    hdl = std::move(hdl_);
    hdl_ = nullptr;
    conns.swap(remote_conns_);
    keeper = std::move(keeper_);
    keeper_ = nullptr;
  }
  // The node closes every connection; the handles it kept go with it.
  conns.clear();
  if (keeper && !core_->closing())
    caf::anon_send_exit(keeper, caf::exit_reason::user_shutdown);
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
