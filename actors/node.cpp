#include "actors/node.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>

#include <google/protobuf/stubs/logging.h>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>

#include "common/error.hpp"
#include "common/fd_limit.hpp"
#include "common/logging.hpp"
#include "common/rate_limiter.hpp"

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

caf::expected<std::unique_ptr<node>> node::open(caf::actor_system& sys,
                                                options opts) {
  route_protobuf_log();
  if (auto problem = validate(opts); !problem.empty())
    return make_error(errc::invalid_argument, problem);
  set_log_level(opts.log_level);
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
  return std::unique_ptr<node>{new node(sys, std::move(opts), std::move(*dev))};
}

node::node(caf::actor_system& sys, options opts, transport::device_ptr dev)
    : sys_(sys), opts_(std::move(opts)), dev_(std::move(dev)) {
  pool_ = std::make_shared<memory_pool>(dev_, opts_.arena_size_bytes,
                                        opts_.max_alloc_bytes);
  allocator_ = spawn_allocator(sys_, pool_);
}

node::~node() {
  close();
}

caf::expected<connection_actor> node::adopt(transport::queue_pair_ptr qp) {
  std::lock_guard<std::mutex> guard{mtx_};
  // close() sets closing_ before it takes the list under mtx_: a
  // connection is either in the list it closes or refused here.
  if (closing_)
    return closed_error();
  auto conn = spawn_connection(sys_, dev_, std::move(qp), pool_, allocator_,
                               opts_, published_);
  // Forget connections that are gone already.
  connections_.erase(std::remove_if(connections_.begin(), connections_.end(),
                                    [](const caf::actor_addr& a) {
                                      return !caf::actor_cast<caf::actor>(a);
                                    }),
                     connections_.end());
  connections_.push_back(conn.address());
  return conn;
}

caf::expected<bool> node::publish(const std::string& name, caf::actor actor) {
  if (name.empty() || name.size() > 256)
    return make_error(errc::invalid_argument,
                      "actor names have 1 to 256 bytes; this one has "
                          + std::to_string(name.size()));
  if (!actor)
    return make_error(errc::invalid_argument,
                      "cannot publish an invalid actor");
  if (closing_)
    return closed_error();
  return published_->put(name, caf::actor_cast<caf::strong_actor_ptr>(actor));
}

bool node::unpublish(const std::string& name) {
  return published_->erase(name);
}

caf::error node::closed_error() {
  return make_error(errc::closed, "the node was closed; open a new node");
}

caf::expected<std::pair<std::string, uint16_t>>
node::endpoint(const std::string& host_port) const {
  if (closing_)
    return closed_error();
  return transport::parse_address(host_port);
}

transport::conn_params node::offer() const {
  return {opts_.max_message_len_bytes, opts_.recv_depth};
}

caf::expected<connection_actor> node::connect(const std::string& host_port) {
  auto addr = endpoint(host_port);
  if (!addr)
    return std::move(addr.error());
  auto qp = dev_->connect(addr->first, addr->second, offer(),
                          std::chrono::milliseconds{opts_.connect_timeout_ms});
  if (!qp)
    return std::move(qp.error());
  return adopt(std::move(*qp));
}

caf::expected<uint16_t> node::listen(const std::string& host_port,
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

void node::close() {
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

} // namespace rdmactor
