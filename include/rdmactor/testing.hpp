#pragma once

/// <rdmactor/testing.hpp>: support for tests of actors that use rdmactor.
///
/// Two connected nodes in one process (`two_nodes`, a default-constructible
/// fixture for `BOOST_FIXTURE_TEST_CASE` or any other framework) and
/// blocking helpers that wait for an answer with a bounded timeout
/// (`call`, `receive_within`, `eventually`).  Header-only; it does not
/// depend on Boost: failures are error values, and the fixture throws
/// `std::runtime_error` (reported by Boost.Test as a setup failure) when
/// it cannot connect.
///
/// Environment (read by `test_options` and `two_nodes`):
/// - `RDMACTOR_TEST_FABRIC`: `soft` (default) or `verbs` (a constructor
///   argument overrides it);
/// - `RDMACTOR_TEST_HOST`: the address the server listens on (default
///   127.0.0.1; on verbs, the address of the RDMA interface);
/// - `RDMACTOR_TEST_TIMEOUT_SCALE`: multiplies every timeout (1-100, for
///   slow machines such as an emulated Soft-RoCE VM);
/// - `RDMACTOR_TEST_LOG`: rdmactor's log level (default warn).

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/after.hpp>
#include <caf/scoped_actor.hpp>

#include "rdmactor/config.hpp"
#include "rdmactor/connection.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/node.hpp"
#include "rdmactor/options.hpp"

namespace rdmactor::testing {

/// Returns the environment variable `name`, or `fallback` when unset or
/// empty.
inline std::string env_or(const char* name, const char* fallback) {
  auto* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

/// Returns RDMACTOR_TEST_TIMEOUT_SCALE (1 when unset or out of 1-100).
inline uint32_t timeout_scale() {
  auto v = std::strtoul(env_or("RDMACTOR_TEST_TIMEOUT_SCALE", "1").c_str(),
                        nullptr, 10);
  return v >= 1 && v <= 100 ? static_cast<uint32_t>(v) : 1;
}

/// The default bound of every wait of this header: 10 s times the scale.
inline std::chrono::milliseconds default_timeout() {
  return std::chrono::milliseconds{10000} * timeout_scale();
}

/// Options for tests: the fabric of `fabric` (empty: RDMACTOR_TEST_FABRIC,
/// default "soft"), small buffers (4 KiB messages, 16 receives, 1 MiB
/// arenas) so that tests exercise chunking, and timeouts of 3 s times the
/// scale, so that a lost answer fails a test quickly (the keepalive, 5 s,
/// scales as well).
inline options test_options(std::string fabric = {}) {
  options o;
  o.fabric = fabric.empty() ? env_or("RDMACTOR_TEST_FABRIC", "soft")
                            : std::move(fabric);
  o.max_message_len_bytes = 4096;
  o.recv_depth = 16;
  o.request_timeout_ms = 3000 * timeout_scale();
  o.connect_timeout_ms = 3000 * timeout_scale();
  // The keepalive scales too: in a slow VM, an idle connection whose Pong
  // comes late would otherwise read as a frozen peer and be closed.
  o.keepalive_ms = 5000 * timeout_scale();
  o.arena_size_bytes = 1 << 20;
  o.max_alloc_bytes = 64 << 20;
  o.log_level = env_or("RDMACTOR_TEST_LOG", "warn");
  return o;
}

/// Sends `xs...` to `hdl` from a scoped actor and waits for the answer, at
/// most `timeout`: the value, or the error (CAF's `request_timeout` when
/// no answer came in time).
template <class T, class Handle, class... Ts>
caf::expected<T> call_within(caf::actor_system& sys,
                             std::chrono::milliseconds timeout,
                             const Handle& hdl, Ts&&... xs) {
  caf::scoped_actor self{sys};
  caf::expected<T> result{make_error(errc::internal_error, "no answer")};
  self->request(hdl, timeout, std::forward<Ts>(xs)...)
      .receive([&](T& x) { result = std::move(x); },
               [&](caf::error& err) { result = std::move(err); });
  return result;
}

/// `call_within` with `default_timeout()`:
/// `auto mr = call<local_mr>(sys, conn, alloc_local_mr_atom_v, uint64_t{64},
/// uint64_t{8});`
template <class T, class Handle, class... Ts>
caf::expected<T> call(caf::actor_system& sys, const Handle& hdl, Ts&&... xs) {
  return call_within<T>(sys, default_timeout(), hdl, std::forward<Ts>(xs)...);
}

/// Waits for one message that one of `fs` handles, at most `timeout`;
/// returns false on timeout.
template <class... Fs>
bool receive_within(caf::scoped_actor& self, std::chrono::milliseconds timeout,
                    Fs... fs) {
  bool received = true;
  self->receive(
      std::move(fs)..., caf::after(timeout) >> [&] { received = false; });
  return received;
}

/// Polls `pred` every 10 ms for at most `timeout`; returns its last value.
/// For state that changes without a message to wait for (e.g. memory that
/// returns to the allocator when a connection's queue pair closed).
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = default_timeout()) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

/// Two nodes in one actor system, one connection between them, seen from
/// both ends: `client_conn` (the client's end, which connected) and
/// `server_conn` (the end the server accepted).  Use it as a Boost.Test
/// fixture (`BOOST_FIXTURE_TEST_CASE(name, rdmactor::testing::two_nodes)`)
/// or as a member.  The destructor closes both nodes; the actor system
/// ends after them.
struct two_nodes {
  /// The configuration (loads rdmactor's system hook).
  rdmactor::config cfg;
  /// The actor system both nodes run in.
  caf::actor_system sys;
  /// The options both nodes were opened with.
  options opts;
  std::unique_ptr<node> server;
  std::unique_ptr<node> client;
  connection_actor server_conn;
  connection_actor client_conn;
  /// The address the server listens on (RDMACTOR_TEST_HOST).
  std::string host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
  uint16_t port = 0;

  /// Opens both nodes with `test_options()` and connects them.
  two_nodes() : two_nodes(test_options()) {}

  /// Opens both nodes with `o` and connects them; e.g.
  /// `two_nodes{test_options("verbs")}` for verbs regardless of the
  /// environment.  Throws std::runtime_error naming the cause on failure.
  explicit two_nodes(options o) : sys(cfg), opts(std::move(o)) {
    auto s = node::open(sys, opts);
    auto c = node::open(sys, opts);
    if (!s || !c)
      throw std::runtime_error("rdmactor::testing: cannot open the nodes: "
                               + render(!s ? s.error() : c.error()));
    server = std::move(*s);
    client = std::move(*c);
    caf::scoped_actor acceptor{sys};
    auto p = server->listen(host + ":0",
                            caf::actor_cast<acceptor_actor>(acceptor));
    if (!p)
      throw std::runtime_error("rdmactor::testing: listen: "
                               + render(p.error()));
    port = *p;
    auto conn = client->connect(host + ":" + std::to_string(port));
    if (!conn)
      throw std::runtime_error("rdmactor::testing: connect: "
                               + render(conn.error()));
    client_conn = std::move(*conn);
    if (!receive_within(acceptor, default_timeout(),
                        [&](accepted_atom, connection_actor& x) {
                          server_conn = std::move(x);
                        }))
      throw std::runtime_error("rdmactor::testing: the server accepted no "
                               "connection within "
                               + std::to_string(default_timeout().count())
                               + " ms");
  }

  two_nodes(const two_nodes&) = delete;
  two_nodes& operator=(const two_nodes&) = delete;

  ~two_nodes() {
    server_conn = nullptr;
    client_conn = nullptr;
    client->close();
    server->close();
  }

  /// `call<T>(sys, hdl, xs...)` in this fixture's actor system.
  template <class T, class Handle, class... Ts>
  caf::expected<T> call(const Handle& hdl, Ts&&... xs) {
    return testing::call<T>(sys, hdl, std::forward<Ts>(xs)...);
  }
};

} // namespace rdmactor::testing
