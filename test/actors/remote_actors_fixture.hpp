#pragma once

// Two rdmactor nodes in two actor systems of one process whose configs
// register the message types of the remote-actor tests (as an application
// registers its own), connected as in fixture.hpp; and those types,
// configs and the actors the tests publish, which the suites on the
// deterministic harness (test/actors/remote/) use as well.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/scoped_actor.hpp>

#include "test/actors/fixture.hpp"

namespace rdmactor::test {

/// A small struct message (registered on both sides).
struct point {
  int32_t x = 0;
  int32_t y = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, point& p) {
  return f(caf::meta::type_name("point"), p.x, p.y);
}

/// Registered on neither side.
struct unregistered_thing {
  int32_t v = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, unregistered_thing& x) {
  return f(caf::meta::type_name("unregistered_thing"), x.v);
}

/// Registered on the client only.
struct client_only {
  int32_t v = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, client_only& x) {
  return f(caf::meta::type_name("client_only"), x.v);
}

/// Registered as "point" on the server: same name, other layout.
struct fake_point {
  std::string s;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fake_point& x) {
  return f(caf::meta::type_name("point"), x.s);
}

using byte_vector = std::vector<uint8_t>;

/// The client's or the server's config.
struct remote_config : rdmactor::config {
  explicit remote_config(bool client, bool mismatched = false) {
    if (mismatched)
      add_message_type<fake_point>("point");
    else
      add_message_type<point>("point");
    add_message_type<byte_vector>("byte_vector");
    add_message_type<handle_box>("handle_box");
    if (client)
      add_message_type<client_only>("client_only");
    set("scheduler.max-threads", 4);
  }
};

struct remote_system {
  remote_config cfg;
  caf::actor_system sys;
  explicit remote_system(bool client, bool mismatched = false)
      : cfg(client, mismatched), sys(cfg) {}
};

/// The server's service: values, an error, a message back to the sender.
inline caf::behavior service(caf::event_based_actor* self) {
  return {
      [](point p) {
        return point{p.x + 1, p.y + 1};
      },
      [](int32_t a, int32_t b) { return a + b; },
      [](const std::string& s) -> caf::result<std::string> {
        if (s == "fail")
          return make_error(errc::invalid_argument,
                            "the service refuses 'fail'");
        return "echo:" + s;
      },
      [](const byte_vector& v) { return static_cast<uint64_t>(v.size()); },
      [](int32_t, const byte_vector& v) { return v; },
      [self](caf::atom_value a) {
        // Not a response: a message of its own to the sender (its proxy).
        self->send(caf::actor_cast<caf::actor>(self->current_sender()),
                   caf::atom("pong"), a);
      },
  };
}

/// Answers nothing (the request stays pending); tells `watcher` (if
/// valid) that one came.
inline caf::behavior silent(caf::event_based_actor* self, caf::actor watcher) {
  return {[=](int32_t, int32_t) -> caf::result<int32_t> {
    if (watcher)
      self->send(watcher, caf::atom("got"));
    return self->make_response_promise<int32_t>();
  }};
}

/// A subscription: answers a string with "<tag>:<string>", quits on
/// 'quit'.
inline caf::behavior subscription(caf::event_based_actor* self,
                                  std::string tag) {
  return {
      [tag](const std::string& s) { return tag + ":" + s; },
      [self](caf::atom_value a) {
        if (a == caf::atom("quit"))
          self->quit();
      },
  };
}

/// Client and server node, one connection between them.
struct remote_nodes {
  remote_system client_side{true};
  remote_system server_side;
  caf::actor_system& sys = client_side.sys;
  caf::actor_system& server_sys = server_side.sys;
  std::unique_ptr<node> server;
  std::unique_ptr<node> client;
  connection_actor server_conn;
  connection_actor client_conn;
  std::unique_ptr<caf::scoped_actor> acceptor;

  explicit remote_nodes(bool server_mismatched = false,
                        options o = test_options())
      : remote_nodes(server_mismatched, o, o) {}

  remote_nodes(bool server_mismatched, options o, options server_opts)
      : server_side(false, server_mismatched) {
    auto s = node::open(server_sys, server_opts);
    auto c = node::open(sys, o);
    if (!s || !c)
      throw std::runtime_error("cannot open nodes: "
                               + render(!s ? s.error() : c.error()));
    server = std::move(*s);
    client = std::move(*c);
    auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
    acceptor = std::make_unique<caf::scoped_actor>(server_sys);
    auto p
        = server->listen(host + ":0", caf::actor_cast<caf::actor>(*acceptor));
    if (!p)
      throw std::runtime_error("listen: " + render(p.error()));
    auto conn = client->connect(host + ":" + std::to_string(*p));
    if (!conn)
      throw std::runtime_error("connect: " + render(conn.error()));
    client_conn = *conn;
    (*acceptor)->receive(
        [&](accepted_atom, connection_actor& c) { server_conn = c; },
        caf::after(std::chrono::seconds(10)) >>
            [] { throw std::runtime_error("no connection accepted"); });
  }

  ~remote_nodes() {
    client->close();
    server->close();
  }

  /// Publishes `actor` on the server's end under `name`.
  void publish(const std::string& name, const caf::actor& actor) {
    auto r
        = call<bool>(server_sys, server_conn, publish_atom::value, name, actor);
    if (!r)
      throw std::runtime_error("publish: " + render(r.error()));
  }

  /// Looks `name` up on the client's end.
  caf::expected<caf::actor> lookup(const std::string& name) {
    return call<caf::actor>(sys, client_conn, lookup_atom::value, name);
  }
};

} // namespace rdmactor::test
