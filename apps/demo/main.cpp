// rdmactor-demo: walks through every rdmactor operation with verified
// content.  Without --listen/--connect it runs both sides in one process.

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/config_option_adder.hpp>
#include <caf/scoped_actor.hpp>

#include "apps/demo/demo_client.hpp"
#include "apps/demo/demo_server.hpp"
#include "rdmactor/config.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/node.hpp"

namespace {

using namespace rdmactor;

class demo_config : public rdmactor::config {
public:
  std::string listen;
  std::string connect;
  std::string fabric;
  std::string device;
  std::string host = "127.0.0.1";
  uint32_t max_message_len = 0;

  demo_config() {
    caf::config_option_adder{custom_options_, "global"}
        .add(listen, "listen",
             "serve clients on HOST:PORT until SIGINT/SIGTERM")
        .add(connect, "connect", "run the client against HOST:PORT")
        .add(fabric, "fabric", "soft or verbs (default: rdmactor.fabric)")
        .add(device, "device", "verbs device name (default: first)")
        .add(host, "host",
             "address both sides use in one process (default: 127.0.0.1; on "
             "verbs, an address of the RDMA interface)")
        .add(max_message_len, "max-message-len",
             "largest message in bytes (default: "
             "rdmactor.max-message-len-bytes)");
  }
};

std::atomic<bool> stop_requested{false};

extern "C" void on_signal(int) {
  stop_requested = true;
}

int fail(const caf::error& err) {
  std::cerr << "rdmactor-demo: " << render(err) << "\n";
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  demo_config cfg;
  if (auto err = cfg.parse(argc, argv, default_config_file().c_str())) {
    std::cerr << "rdmactor-demo: " << cfg.render(err) << "\n"
              << "run rdmactor-demo --help for the options\n";
    return 2;
  }
  if (cfg.cli_helptext_printed) {
    std::cout << "\n" << cfg.rdmactor_help();
    std::cout << "\nWithout --listen/--connect, both sides run in this "
                 "process over the\nconfigured fabric (soft unless told "
                 "otherwise). Every rdmactor.* option\nof config/rdmactor.ini "
                 "can also be given as --rdmactor.NAME=VALUE.\n"
                 "\nA server allocates memory to read a region a client "
                 "lends (SendMR LOCAL,\nof the length the client claims) "
                 "only within rdmactor.peer-max-claim-bytes\nper connection "
                 "(default 64 MiB; alloc_for_peer). A region over it is not "
                 "read:\nthe server logs it, answers a refusal the client "
                 "reports, and keeps serving.\n";
    return 0;
  }
  auto opts = cfg.opts;
  if (!cfg.fabric.empty())
    opts.fabric = cfg.fabric;
  if (!cfg.device.empty())
    opts.device = cfg.device;
  if (cfg.max_message_len != 0)
    opts.max_message_len_bytes = cfg.max_message_len;
  bool in_process = cfg.listen.empty() && cfg.connect.empty();
  if (in_process && opts.fabric == "auto")
    opts.fabric = "soft";
  caf::actor_system sys{cfg};
  auto nd = node::open(sys, opts);
  if (!nd)
    return fail(nd.error());
  auto& n = **nd;
  std::printf("rdmactor-demo: fabric %s (%s)\n", n.device()->kind(),
              n.device()->name().c_str());
  if (!cfg.listen.empty()) {
    auto acceptor = demo::spawn_acceptor(sys);
    auto port = n.listen(cfg.listen, acceptor);
    if (!port)
      return fail(port.error());
    std::printf("serving on port %u; SIGINT or SIGTERM stops\n", *port);
    std::fflush(stdout);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    while (!stop_requested)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::printf("shutting down\n");
    n.close();
    caf::anon_send_exit(acceptor, caf::exit_reason::user_shutdown);
    return 0;
  }
  if (!cfg.connect.empty()) {
    auto conn = n.connect(cfg.connect);
    if (!conn)
      return fail(conn.error());
    auto ok = demo::run_client(sys, *conn);
    std::printf("%s\n", ok ? "all operations verified" : "VERIFICATION FAILED");
    n.close();
    return ok ? 0 : 1;
  }
  // Both sides in one process: a second node serves.
  auto server_node = node::open(sys, opts);
  if (!server_node)
    return fail(server_node.error());
  auto acceptor = demo::spawn_acceptor(sys);
  auto port = (*server_node)->listen(cfg.host + ":0", acceptor);
  if (!port)
    return fail(port.error());
  auto conn = n.connect(cfg.host + ":" + std::to_string(*port));
  if (!conn)
    return fail(conn.error());
  auto ok = demo::run_client(sys, *conn);
  n.close();
  (*server_node)->close();
  caf::anon_send_exit(acceptor, caf::exit_reason::user_shutdown);
  // Every byte allocated on the peers' behalf returns once both are closed.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto a = n.memory_stats().bytes_in_use;
  auto b = (*server_node)->memory_stats().bytes_in_use;
  std::printf("bytes in use after close: client %llu, server %llu\n",
              static_cast<unsigned long long>(a),
              static_cast<unsigned long long>(b));
  std::printf("%s\n", ok ? "all operations verified" : "VERIFICATION FAILED");
  return ok ? 0 : 1;
}
