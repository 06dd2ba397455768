#include "actors/node/node_core.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>

#include <google/protobuf/stubs/logging.h>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/after.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "common/fd_limit.hpp"
#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "common/thread_name.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/system_hook.hpp"
#include "transport/shared_receives.hpp"

namespace rdmactor {

namespace {

/// Routes protobuf's own log lines (e.g. a peer's string field with invalid
/// UTF-8) to rdmactor's logger instead of stderr, at most 100 of them.
void route_protobuf_log() {
  static std::once_flag once;
  std::call_once(once, [] {
    google::protobuf::SetLogHandler([](google::protobuf::LogLevel level,
                                       const char* file, int line,
                                       const std::string& msg) {
      static std::atomic<int> budget{100};
      if (budget.fetch_sub(1) <= 0)
        return;
      if (level >= google::protobuf::LOGLEVEL_ERROR)
        log().warn("protobuf {}:{}: {}", file, line, msg);
      else
        log().debug("protobuf {}:{}: {}", file, line, msg);
    });
  });
}

} // namespace

caf::expected<std::shared_ptr<node_core>>
node_core::open(caf::actor_system& sys, options opts) {
  route_protobuf_log();
  if (auto problem = validate(opts); !problem.empty())
    return make_error(errc::invalid_argument, problem);
  set_log_level(opts.log_level);
  if (!has_system_hook(sys)) {
    // Said once per process: the hang it prevents cannot say it itself.
    static std::once_flag once;
    std::call_once(once, [] {
      log().warn("this actor system has no rdmactor::system_hook (a plain "
                 "caf::actor_system_config): close every node before its "
                 "actor system, or ~actor_system waits for the node forever; "
                 "use rdmactor::config or cfg.load<rdmactor::system_hook>()");
    });
  }
  if (opts.open_files_limit > 0) {
    auto lim = raise_open_files_limit(opts.open_files_limit);
    if (lim.after != lim.before)
      log().debug("raised the open-files limit from {} to {} (hard limit {})",
                  lim.before, lim.after, lim.hard);
  }
  auto dev = transport::open_device(opts);
  if (!dev)
    return std::move(dev.error());
  log().info("opened fabric {} ({})", (*dev)->kind(), (*dev)->name());
  std::shared_ptr<transport::shared_receives> receives;
  if (opts.shared_receive_queue) {
    auto shared = transport::share_receives(*dev, opts);
    if (shared)
      receives = std::move(*shared);
    else if (code_of(shared.error()) == errc::unsupported)
      // A device without shared receive queues: each connection its own.
      log().info("{}; connections register receive buffers of their own",
                 render(shared.error()));
    else
      return std::move(shared.error());
  }
  std::shared_ptr<node_core> core{
      new node_core(sys, std::move(opts), std::move(*dev))};
  core->receives_ = std::move(receives);
  // Closes the node when the actor system shuts down before it (a no-op
  // when the core is gone by then).
  on_shutdown(sys, [weak = std::weak_ptr<node_core>{core}] {
    if (auto c = weak.lock())
      c->shutdown_with_system();
  });
  return core;
}

node_core::node_core(caf::actor_system& sys, options opts,
                     transport::device_ptr dev)
    : sys_(sys), opts_(std::move(opts)), dev_(std::move(dev)) {
  // The node's identity in Hello: random, never 0 (none).
  std::random_device rd;
  do
    id_ = (uint64_t{rd()} << 32) | rd();
  while (id_ == 0);
  pool_ = std::make_shared<memory_pool>(dev_, opts_.arena_size_bytes,
                                        opts_.max_alloc_bytes);
  allocator_ = spawn_allocator(sys_, pool_);
}

uint64_t node_core::shared_receive_bytes() const noexcept {
  return receives_ ? receives_->registered_bytes() : 0;
}

node_core::~node_core() {
  close();
}

caf::expected<connection_actor> node_core::adopt(transport::queue_pair_ptr qp) {
  std::lock_guard<std::mutex> guard{mtx_};
  // close() sets closing_ before it takes the list under mtx_: a
  // connection is either in the list it closes or refused here.
  if (closing_)
    return closed_error();
  auto conn = spawn_connection(sys_, dev_, std::move(qp), pool_, allocator_,
                               opts_, published_, id_);
  // Forget connections that are gone already, once the list doubled since
  // the last sweep (a sweep per connection made connecting N peers cost
  // O(N^2) upgrades of weak handles).
  if (connections_.size() >= sweep_connections_at_) {
    connections_.erase(std::remove_if(connections_.begin(), connections_.end(),
                                      [](const caf::actor_addr& a) {
                                        return !caf::actor_cast<caf::actor>(a);
                                      }),
                       connections_.end());
    sweep_connections_at_ = std::max<size_t>(64, 2 * connections_.size());
  }
  connections_.push_back(conn.address());
  return conn;
}

caf::expected<bool> node_core::publish(const std::string& name,
                                       caf::actor actor) {
  if (closing_)
    return closed_error();
  return published_->publish(name, actor);
}

bool node_core::unpublish(const std::string& name) {
  return published_->erase(name);
}

caf::error node_core::closed_error() {
  return make_error(errc::closed, "the node was closed; open a new node");
}

caf::expected<std::pair<std::string, uint16_t>>
node_core::endpoint(const std::string& host_port) const {
  if (closing_)
    return closed_error();
  return transport::parse_address(host_port);
}

transport::conn_params node_core::offer() const {
  // Receive buffers of the eager size: larger payloads go by rendezvous
  // (agent_core_rendezvous.cpp), or in eager-sized chunks to a peer
  // without it.
  return {receive_buffer_bytes(opts_), opts_.recv_depth};
}

caf::expected<connection_actor>
node_core::connect(const std::string& host_port) {
  auto addr = endpoint(host_port);
  if (!addr)
    return std::move(addr.error());
  auto qp = dev_->connect(addr->first, addr->second, offer(),
                          std::chrono::milliseconds{opts_.connect_timeout_ms});
  if (!qp)
    return std::move(qp.error());
  return adopt(std::move(*qp));
}

caf::expected<uint16_t> node_core::listen(const std::string& host_port,
                                          caf::actor handler) {
  auto addr = endpoint(host_port);
  if (!addr)
    return std::move(addr.error());
  auto lst = dev_->listen(addr->first, addr->second, offer());
  if (!lst)
    return std::move(lst.error());
  auto acc = std::make_unique<acceptor>();
  acc->listener = std::move(*lst);
  auto port = acc->listener->port();
  auto* l = acc->listener.get();
  acc->thread = std::thread([this, l, handler] {
    name_this_thread("rdm.accept");
    for (;;) {
      auto qp = l->accept(std::chrono::milliseconds{500});
      if (closing_)
        return;
      if (!qp) {
        auto code = code_of(qp.error());
        if (code == errc::closed)
          return;
        if (code != errc::connect_timeout)
          warn_within("connections", "accept failed: " + render(qp.error()));
        continue;
      }
      auto conn = adopt(std::move(*qp));
      if (!conn)
        return; // the node closes
      caf::anon_send(handler, accepted_atom::value, *conn);
    }
  });
  log().info("listening on {}:{}", addr->first, port);
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!closing_) {
      acceptors_.push_back(std::move(acc));
      return port;
    }
  }
  // close() took the acceptors already: this one is ours to stop (its
  // thread may wait for mtx_ in adopt(), so not under it).
  acc->listener->close();
  acc->thread.join();
  return closed_error();
}

void node_core::close() {
  {
    // Under mtx_, so that adopt() and listen() see it before close()
    // takes the lists.
    std::lock_guard<std::mutex> guard{mtx_};
    if (closing_.exchange(true))
      return;
  }
  std::vector<std::unique_ptr<acceptor>> accs;
  std::vector<caf::actor_addr> conns;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    accs.swap(acceptors_);
    conns.swap(connections_);
  }
  for (auto& a : accs)
    a->listener->close();
  for (auto& a : accs)
    if (a->thread.joinable())
      a->thread.join();
  for (auto& c : conns)
    if (auto hdl = caf::actor_cast<caf::actor>(c))
      caf::anon_send_exit(hdl, caf::exit_reason::user_shutdown);
  published_->clear();
  caf::anon_send_exit(allocator_, caf::exit_reason::user_shutdown);
}

void node_core::set_actor(caf::actor_addr addr) {
  std::lock_guard<std::mutex> guard{mtx_};
  actor_ = std::move(addr);
}

void node_core::shutdown_with_system() {
  std::vector<caf::actor> watch;
  caf::actor nd;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& c : connections_)
      if (auto hdl = caf::actor_cast<caf::actor>(c))
        watch.push_back(std::move(hdl));
    nd = caf::actor_cast<caf::actor>(actor_);
  }
  if (nd)
    watch.push_back(nd);
  if (!closing_)
    log().info("the actor system shuts down while node {} is open: closing "
               "it (close nodes before their actor system to choose when)",
               dev_->name());
  caf::scoped_actor self{sys_, true};
  for (auto& hdl : watch)
    self->monitor(hdl);
  close();
  if (nd)
    caf::anon_send_exit(nd, caf::exit_reason::user_shutdown);
  auto pending = watch.size();
  watch.clear(); // our references must not keep them alive
  nd = nullptr;
  auto deadline = std::chrono::steady_clock::now()
                  + std::chrono::milliseconds{opts_.close_timeout_ms}
                  + std::chrono::seconds{2};
  while (pending > 0) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      break;
    bool timed_out = false;
    self->receive(
        [&](caf::down_msg&) { --pending; },
        caf::after(std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - now))
            >> [&] { timed_out = true; });
    if (timed_out)
      break;
  }
  if (pending > 0)
    log().warn("{} actors of node {} did not end while the actor system "
               "shut down",
               pending, dev_->name());
}

} // namespace rdmactor
