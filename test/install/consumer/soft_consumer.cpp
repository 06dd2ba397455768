// A soft-only consumer of an installed rdmactor: node actors used from
// inside actors over the soft fabric.  Building it needs no rdma-core
// headers (the install_consumer test checks that none was read).
#include <iostream>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

#include <rdmactor/rdmactor.hpp>

using namespace rdmactor;
using namespace std::chrono_literals;

int main() {
  rdmactor::config cfg;
  cfg.opts.fabric = "soft";
  caf::actor_system sys{cfg};
  auto server = spawn_node(sys, cfg.opts);
  auto client = spawn_node(sys, cfg.opts);
  if (!server || !client) {
    std::cerr << render(!server ? server.error() : client.error()) << "\n";
    return 1;
  }
  caf::scoped_actor self{sys};
  bool ok = true;
  auto on_error = [&](caf::error& err) {
    std::cerr << render(err) << "\n";
    ok = false;
  };
  uint16_t port = 0;
  self->request(*server, 5s, listen_atom_v, std::string{"127.0.0.1:0"},
                caf::actor_cast<acceptor_actor>(self))
      .receive([&](uint16_t p) { port = p; }, on_error);
  if (!ok)
    return 1;
  // An event-based actor connects (asynchronously) and sends bytes; it
  // runs through a scheduler job (<rdmactor/scheduler_job.hpp>), as the
  // docs/data-handlers.md recommends for actors on a hot path.
  spawn_with_scheduler_job(sys, [nd = *client, to = caf::actor{self},
                                 addr = "127.0.0.1:" + std::to_string(port)](
                                    caf::event_based_actor* user) {
    user->request(nd, 10s, connect_atom_v, addr)
        .then(
            [=](connection_actor& conn) {
              user->request(conn, 5s, send_data_atom_v, std::string{"soft"})
                  .then([=](uint64_t n) { user->send(to, n, conn); },
                        [=](caf::error& err) { user->send(to, err); });
            },
            [=](caf::error& err) { user->send(to, err); });
  });
  connection_actor accepted;
  connection_actor conn;
  for (int i = 0; i < 2 && ok; ++i)
    self->receive(
        [&](accepted_atom, connection_actor& c) { accepted = std::move(c); },
        [&](uint64_t, connection_actor& c) { conn = std::move(c); },
        [&](caf::error& err) { on_error(err); },
        caf::after(30s) >> [&] { ok = false; });
  if (!ok)
    return 1;
  self->request(accepted, 5s, receive_data_atom_v)
      .receive(
          [&](local_mr& got) {
            auto text = std::string(reinterpret_cast<const char*>(got.data()),
                                    got.size());
            std::cout << "soft consumer received: " << text << "\n";
            ok = text == "soft";
          },
          on_error);
  for (auto& nd : {*client, *server})
    self->request(nd, 10s, close_atom_v).receive([](bool) {}, on_error);
  return ok ? 0 : 1;
}
