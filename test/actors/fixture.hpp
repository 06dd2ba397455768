#pragma once

// Two rdmactor nodes in two actor systems of one process, connected over
// the fabric named by RDMACTOR_TEST_FABRIC (default "soft") on
// RDMACTOR_TEST_HOST (default 127.0.0.1), plus blocking helpers for tests.

#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/scoped_actor.hpp>

#include "rdmactor/config.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/node.hpp"
#include "rdmactor/testing.hpp"

namespace rdmactor::test {

// The helpers users get from <rdmactor/testing.hpp>; the suites' own
// fixtures below add what only they need.
using rdmactor::testing::env_or;
using rdmactor::testing::eventually;
using rdmactor::testing::timeout_scale;

/// testing::test_options() plus a short RNR timeout (the suites provoke
/// receiver-not-ready on purpose).
inline options test_options() {
  auto o = testing::test_options();
  o.rnr_timeout_ms = 1000;
  return o;
}

/// An application type that holds an actor handle (registered by the
/// suites' configs as "handle_box"): what must not cross a connection.
struct handle_box {
  caf::actor hdl;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, handle_box& x) {
  return f(caf::meta::type_name("handle_box"), x.hdl);
}

/// Holds the config and the actor system (in that order).
struct system_holder {
  rdmactor::config cfg;
  caf::actor_system sys;

  system_holder() : sys(init(cfg)) {}

  static rdmactor::config& init(rdmactor::config& cfg) {
    cfg.add_message_type<handle_box>("handle_box");
    cfg.set("scheduler.max-threads", 4);
    return cfg;
  }
};

/// Runs one blocking request with a timeout of 30 s times the scale;
/// returns the value or error.
template <class T, class Handle, class... Ts>
caf::expected<T> call(caf::actor_system& sys, const Handle& hdl, Ts&&... xs) {
  return testing::call_within<T>(sys,
                                 std::chrono::seconds(30 * timeout_scale()),
                                 hdl, std::forward<Ts>(xs)...);
}

/// Two nodes, each in its own actor system, and one connection between
/// them, seen from both ends.  `sys` is the client's system (tests make
/// their calls from it); the server runs in `server_side.sys`.
struct two_nodes : system_holder {
  system_holder server_side;
  options opts;
  std::unique_ptr<node> server;
  std::unique_ptr<node> client;
  connection_actor server_conn; // the server's end
  connection_actor client_conn; // the client's end
  std::string host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");

  explicit two_nodes(options o = test_options()) : two_nodes(o, o) {}

  /// Two nodes with options of their own: `o` for the client (and `opts`),
  /// `server_opts` for the server.
  two_nodes(options o, const options& server_opts) : opts(std::move(o)) {
    auto s = node::open(server_side.sys, server_opts);
    auto c = node::open(sys, opts);
    if (!s || !c)
      throw std::runtime_error("cannot open nodes: "
                               + render(!s ? s.error() : c.error()));
    server = std::move(*s);
    client = std::move(*c);
    connect();
  }

  /// Connects the client to the server and waits for the accepted end.
  void connect() {
    caf::scoped_actor self{sys};
    if (port_ == 0) {
      acceptor_ = std::make_unique<caf::scoped_actor>(sys);
      auto p = server->listen(host + ":0",
                              caf::actor_cast<caf::actor>(*acceptor_));
      if (!p)
        throw std::runtime_error("listen: " + render(p.error()));
      port_ = *p;
    }
    auto conn = client->connect(host + ":" + std::to_string(port_));
    if (!conn)
      throw std::runtime_error("connect: " + render(conn.error()));
    client_conn = *conn;
    (*acceptor_)
        ->receive(
            [&](accepted_atom, connection_actor& c) { server_conn = c; },
            caf::after(std::chrono::seconds(10)) >>
                [] { throw std::runtime_error("no connection accepted"); });
  }

  uint16_t port() const {
    return port_;
  }

  ~two_nodes() {
    client->close();
    server->close();
  }

private:
  uint16_t port_ = 0;
  std::unique_ptr<caf::scoped_actor> acceptor_;
};

} // namespace rdmactor::test
