#pragma once

// The deterministic harness of the remote-actor suites: agent_harness with
// an actor system of its own on each side, as two nodes have (their own
// registered message types, node ids, proxies and published actors), and
// the calls those suites make: publish, look up, spawn actors that end
// with the harness.

#include <string>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include "test/support/agent_harness.hpp"

namespace rdmactor::test {

/// Two nodes' actor systems and one connection between them, on the
/// wired fake links of `agent_harness`: each side's agent sets up its
/// remote actors (proxies, codec, credit windows) as a node's connection
/// does, and publishes what its node published (`side::published`).
/// `settle()` runs both systems and carries frames until nothing moves;
/// the simulated clock moves both systems' clocks together.
class remote_harness : public agent_harness {
public:
  /// Each side on an actor system of the config in `own`; one connection,
  /// settled.
  remote_harness(options client_opts, options server_opts, systems own)
      : agent_harness(std::move(client_opts), std::move(server_opts),
                      std::move(own)) {}

  /// As above, without a connection (set `client.opts` or `server.opts`,
  /// then `connect`).
  remote_harness(options client_opts, options server_opts, systems own,
                 unconnected_t)
      : agent_harness(std::move(client_opts), std::move(server_opts),
                      std::move(own), unconnected) {}

  /// Tells every actor `spawn` made to exit, before the harness closes the
  /// connections and checks the pools.
  ~remote_harness() {
    for (auto& a : spawned_)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  /// Spawns `fun(xs...)` in the actor system of `s`; the harness holds it
  /// and tells it to exit at the end.
  template <class F, class... Ts>
  auto spawn(side& s, F fun, Ts&&... xs) {
    auto hdl = s.sys().spawn(fun, std::forward<Ts>(xs)...);
    spawned_.push_back(caf::actor_cast<caf::actor>(hdl));
    return hdl;
  }

  /// Publishes `actor` under `name` on the server's end of the connection
  /// (its connection's directory); fails the test when refused.
  void publish(const std::string& name, const caf::actor& actor) {
    auto r = call<bool>(server_conn, publish_atom::value, name, actor);
    BOOST_REQUIRE_MESSAGE(r, "publish " << name << ": " << render(r));
  }

  /// The client's lookup of `name`: a proxy, or the error.
  caf::expected<caf::actor> lookup(const std::string& name) {
    return call<caf::actor>(client_conn, lookup_atom::value, name);
  }

  /// The client's lookup of `name` for a typed handle of `interface`
  /// (`interface_of<Handle>(sys())`).
  caf::expected<caf::actor> lookup(const std::string& name,
                                   std::vector<std::string> interface) {
    return call<caf::actor>(client_conn, lookup_atom::value, name,
                            std::move(interface));
  }

  /// The client's proxy of the actor the server published under `name`;
  /// fails the test when there is none.
  caf::actor proxy_of(const std::string& name) {
    auto p = lookup(name);
    BOOST_REQUIRE_MESSAGE(p, "lookup " << name << ": " << render(p));
    BOOST_REQUIRE(*p);
    return std::move(*p);
  }

private:
  std::vector<caf::actor> spawned_;
};

} // namespace rdmactor::test
