// The README's tutorial: connect, allocate, write, send.  Two nodes in one
// process over the soft fabric; the same code runs over verbs with
// --rdmactor.fabric="verbs".
#include <cstring>
#include <iostream>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <rdmactor/rdmactor.hpp>

using namespace rdmactor;
using namespace std::chrono_literals;

int main(int argc, char** argv) {
  rdmactor::config cfg; // binds [rdmactor] options, registers error codes
  if (auto err = cfg.parse(argc, argv); err || cfg.cli_helptext_printed) {
    if (!err)
      std::cout << "\n" << cfg.rdmactor_help();
    return err ? 1 : 0;
  }
  cfg.opts.fabric = cfg.opts.fabric == "auto" ? "soft" : cfg.opts.fabric;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};

  // A server node accepts connections; a client node connects.
  auto server = node::open(sys, cfg.opts);
  auto client = node::open(sys, cfg.opts);
  if (!server || !client) {
    std::cerr << render(!server ? server.error() : client.error()) << "\n";
    return 1;
  }
  // Accepted peers arrive at a typed acceptor: here the scoped actor.
  auto port
      = (*server)->listen("127.0.0.1:0", caf::actor_cast<acceptor_actor>(self));
  auto conn = (*client)->connect("127.0.0.1:" + std::to_string(*port));
  if (!conn) {
    std::cerr << render(conn.error()) << "\n";
    return 1;
  }
  connection_actor peer; // the server's end of the connection
  self->receive([&](accepted_atom, connection_actor& c) { peer = c; });

  bool ok = true;
  auto on_error = [&](caf::error& err) {
    std::cerr << render(err) << "\n";
    ok = false;
  };

  // Allocate registered memory and fill it.
  local_mr buf;
  self->request(*conn, 5s, alloc_local_mr_atom_v, uint64_t{4096}, uint64_t{64})
      .receive([&](local_mr& mr) { buf = mr; }, on_error);
  if (!ok)
    return 1;
  std::strcpy(reinterpret_cast<char*>(buf.data()), "hello, rdmactor");

  // One-sided: the peer allocates memory for us and we write into it.
  self->request(*conn, 5s, request_remote_mr_atom_v, uint64_t{4096},
                uint64_t{64})
      .receive(
          [&](remote_mr& rmr) {
            self->request(*conn, 5s, write_atom_v, buf, rmr)
                .receive(
                    [](uint64_t n) { std::cout << "wrote " << n << " B\n"; },
                    on_error);
          },
          on_error);

  // Two-sided: send the buffer; the peer receives it as a local_mr.
  self->request(*conn, 5s, send_data_atom_v, buf)
      .receive([](uint64_t n) { std::cout << "sent " << n << " B\n"; },
               on_error);
  self->request(peer, 5s, receive_data_atom_v)
      .receive(
          [&](local_mr& got) {
            std::cout << "peer received: "
                      << reinterpret_cast<const char*>(got.data()) << "\n";
          },
          on_error);

  // Bytes you hold: one request, the connection copies them into
  // registered memory and sends them.
  self->request(*conn, 5s, send_data_atom_v, std::string{"bytes, too"})
      .receive([](uint64_t n) { std::cout << "sent " << n << " B\n"; },
               on_error);
  self->request(peer, 5s, receive_data_atom_v)
      .receive(
          [&](local_mr& got) {
            std::cout << "peer received: "
                      << std::string(reinterpret_cast<const char*>(got.data()),
                                     got.size())
                      << "\n";
          },
          on_error);

  (*client)->close();
  (*server)->close();
  return ok ? 0 : 1;
}
