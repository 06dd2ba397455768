// rdmactor-soak: a bounded load test.  One server process serves any number
// of client processes; each client runs a fixed number of random operations
// over several connections (each replaced by a new one after 200
// operations or a failure), some of them opened with a fault plan (soft
// fabric), checks every payload it reads back, and ends by checking that
// all its memory returned.  The server checks every payload it receives.
// scripts/soak.sh runs one server and several clients.
//
//   rdmactor-soak --serve=HOST:PORT          until SIGINT/SIGTERM
//   rdmactor-soak --connect=HOST:PORT [--connections=8] [--ops=2000]
//                 [--seed=1] [--fault-rate=0.2] [--max-bytes=1048576]
//
// Both print one summary line and exit 0 only when no payload was corrupt,
// no error happened on a connection without faults, and no byte is left.

#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/config_option_adder.hpp>
#include <caf/send.hpp>

#include "apps/soak/client.hpp"
#include "apps/soak/server.hpp"
#include "rdmactor/config.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/node.hpp"

namespace {

using namespace rdmactor;

class soak_config : public rdmactor::config {
public:
  std::string serve;
  std::string connect;
  std::string fabric;
  uint32_t connections = 8;
  uint64_t ops = 2000;
  uint64_t seed = 1;
  double fault_rate = 0.2;
  std::string fault_kind = "any";
  uint32_t max_bytes = 1 << 20;

  soak_config() {
    caf::config_option_adder{custom_options_, "global"}
        .add(serve, "serve", "serve on HOST:PORT until SIGINT/SIGTERM")
        .add(connect, "connect", "run a client against HOST:PORT")
        .add(fabric, "fabric", "soft or verbs (default: rdmactor.fabric)")
        .add(connections, "connections", "client: connections at once")
        .add(ops, "ops", "client: operations in all")
        .add(seed, "seed", "client: seed of the random choices")
        .add(fault_rate, "fault-rate",
             "client: share of connections with a fault plan (soft only)")
        .add(fault_kind, "fault-kind",
             "client: any, drop, corrupt or delay (default: any)")
        .add(max_bytes, "max-bytes", "client: largest payload in bytes");
  }
};

std::atomic<bool> stop_requested{false};

extern "C" void on_signal(int) {
  stop_requested = true;
}

int serve(caf::actor_system& sys, node& nd, const std::string& where) {
  auto counters = std::make_shared<soak::server_counters>();
  auto acceptor = soak::spawn_soak_acceptor(sys, counters);
  auto port = nd.listen(where, acceptor);
  if (!port) {
    std::cerr << "rdmactor-soak: " << render(port.error()) << "\n";
    return 1;
  }
  std::cout << "serving on port " << *port << std::endl;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  while (!stop_requested)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Clients are gone: whatever they held here must come back.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (nd.memory_stats().bytes_in_use != 0
         && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto left = nd.memory_stats().bytes_in_use;
  nd.close();
  caf::anon_send_exit(acceptor, caf::exit_reason::user_shutdown);
  auto& c = *counters;
  std::cout << "server: connections " << c.connections << ", data chunks "
            << c.data_chunks << " (" << c.data_payloads
            << " whole payloads), lent regions " << c.lent_regions
            << ", returned regions " << c.returned_regions
            << ", lent regions refused " << c.refused_lent << ", corrupt: data "
            << c.corrupt_data << ", lent " << c.corrupt_lent << ", returned "
            << c.corrupt_returned << ", bytes in use with no client " << left
            << std::endl;
  return c.corrupt() == 0 && left == 0 ? 0 : 1;
}

int run_client(caf::actor_system& sys, node& nd, const soak_config& cfg) {
  soak::client_config cc;
  cc.target = cfg.connect;
  cc.connections = cfg.connections;
  cc.ops = cfg.ops;
  cc.seed = cfg.seed;
  cc.fault_rate = cfg.fault_rate;
  cc.fault_kind = cfg.fault_kind;
  cc.max_bytes = cfg.max_bytes;
  auto start = std::chrono::steady_clock::now();
  auto rep = soak::run_client(sys, nd, cc);
  auto secs
      = std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  std::cout << "client " << cfg.seed << ": " << rep.ops << " ops in " << secs
            << " s over " << rep.connections << " connections ("
            << rep.faulty_connections << " with faults), verified reads "
            << rep.verified << ", errors on faulty connections "
            << rep.fault_errors << ", unexpected errors "
            << rep.unexpected_errors << ", corrupt " << rep.corrupt
            << ", bytes in use after close " << rep.bytes_in_use_after
            << std::endl;
  nd.close();
  return rep.unexpected_errors == 0 && rep.corrupt == 0
                 && rep.bytes_in_use_after == 0
             ? 0
             : 1;
}

} // namespace

int main(int argc, char** argv) {
  soak_config cfg;
  if (auto err
      = cfg.parse(argc, argv, rdmactor::default_config_file().c_str())) {
    std::cerr << "rdmactor-soak: " << cfg.render(err) << "\n";
    return 2;
  }
  if (cfg.cli_helptext_printed) {
    std::cout << "\n" << cfg.rdmactor_help();
    std::cout << "\nThe server reads every region a client lends (SendMR "
                 "LOCAL) into memory of\nthe length the client claims, "
                 "within rdmactor.peer-max-claim-bytes per\nconnection "
                 "(default 64 MiB; alloc_for_peer). A region over it is not "
                 "read:\nit is counted as refused (summary line), released, "
                 "and the server keeps\nserving. Every rdmactor.* option of "
                 "config/rdmactor.ini can be given as\n--rdmactor.NAME=VALUE."
                 "\n";
    return 0;
  }
  if (cfg.serve.empty() == cfg.connect.empty()) {
    std::cerr << "rdmactor-soak: give exactly one of --serve and --connect\n";
    return 2;
  }
  auto opts = cfg.opts;
  if (!cfg.fabric.empty())
    opts.fabric = cfg.fabric;
  if (opts.fabric == "auto")
    opts.fabric = "soft";
  caf::actor_system sys{cfg};
  auto nd = node::open(sys, opts);
  if (!nd) {
    std::cerr << "rdmactor-soak: " << render(nd.error()) << "\n";
    return 1;
  }
  return cfg.serve.empty() ? run_client(sys, **nd, cfg)
                           : serve(sys, **nd, cfg.serve);
}
