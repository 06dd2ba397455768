// rdmactor-kv: a key-value store whose gets never touch the server's CPU.
//
// The server keeps a table of fixed-size slots (kv_slot.hpp) in registered
// memory that peers may only read, lends it to every client that connects
// and publishes the actor "kv" that writes it.  A client reads slots with
// one-sided RDMA READ, checking each slot's seqlock (version words and
// checksum) so that a read racing a write is detected and repeated; puts
// are requests to the "kv" actor, the table's only writer.
//
//   rdmactor-kv --serve=HOST:PORT [--slots=N]     until SIGINT/SIGTERM
//   rdmactor-kv --get=HOST:PORT --key=K           prints the value
//   rdmactor-kv --put=HOST:PORT --key=K --value=V
//   rdmactor-kv --watch=HOST:PORT --key=K [--count=N]  prints the next puts
//   rdmactor-kv --bench=HOST:PORT [--clients=N] [--writers=W] [--seconds=S]
//               [--keys=K] [--via=rdma|actor]
//
// Only the installed API is used (<rdmactor/...>, CAF, std).

#include <chrono>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>

#include <pthread.h>

#include <caf/actor_system.hpp>
#include <caf/config_option_adder.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include "kv_client.hpp"
#include "kv_service.hpp"

namespace kv {

kv_config::kv_config() {
  caf::config_option_adder{custom_options_, "global"}
      .add(serve, "serve",
           "serve a table on HOST:PORT (port 0: any) until SIGINT/SIGTERM")
      .add(get, "get", "print the value of --key from the server at HOST:PORT")
      .add(put, "put", "store --value under --key on the server at HOST:PORT")
      .add(watch, "watch",
           "print the next --count puts of --key on the server at HOST:PORT "
           "(a subscription actor the server hands out)")
      .add(count, "count", "watch: puts to wait for (default 1)")
      .add(bench, "bench",
           "fill --keys keys on the server at HOST:PORT, then get random ones "
           "from --clients connections for --seconds")
      .add(key, "key", "the key: 1 to 32 bytes")
      .add(value_help, "value", "the value: 0 to 192 bytes")
      .add(slots, "slots", "server: slots of the table (default 4096)")
      .add(retries, "retries",
           "client: reads of a slot that raced a write repeated per get "
           "before giving up (default 1000)")
      .add(clients, "clients", "bench: connections that get (default 4)")
      .add(writers, "writers",
           "bench: connections that put meanwhile (default 0)")
      .add(seconds, "seconds",
           "bench: how long to get; watch: how long to wait for each put "
           "(default 5)")
      .add(keys, "keys", "bench: keys to fill and get (default 1000)")
      .add(via, "via",
           "bench: rdma (one-sided READ, default), actor (gets as requests "
           "to the server's kv actor over rdmactor) or caf-io (the same over "
           "CAF io: then --bench names the server's --caf-io address)")
      .add(caf_io, "caf-io",
           "server: also publish the kv actor over CAF io on HOST:PORT (port "
           "0: any), for the bench's --via=caf-io")
      .add(fabric, "fabric", "soft or verbs (default: rdmactor.fabric)");
  // The watcher's handle travels in a reply: registered in both processes.
  add_message_type<watcher>("kv::watcher");
}

int run_get(caf::actor_system& sys, rdmactor::node& nd, const kv_config& cfg) {
  auto c = client::open(sys, nd, cfg.get, cfg.retries);
  if (!c) {
    std::cerr << "rdmactor-kv: " << rdmactor::render(c.error()) << std::endl;
    return 1;
  }
  auto r = (*c)->get(cfg.key);
  if (!r) {
    std::cerr << "rdmactor-kv: get " << cfg.key << ": "
              << rdmactor::render(r.error()) << std::endl;
    return 1;
  }
  if (!r->found) {
    std::cerr << "rdmactor-kv: no value under the key '" << cfg.key << "'"
              << std::endl;
    return 1;
  }
  std::cout << r->value << std::endl;
  return 0;
}

int run_put(caf::actor_system& sys, rdmactor::node& nd, const kv_config& cfg) {
  auto c = client::open(sys, nd, cfg.put, cfg.retries);
  if (!c) {
    std::cerr << "rdmactor-kv: " << rdmactor::render(c.error()) << std::endl;
    return 1;
  }
  auto v = (*c)->put(cfg.key, cfg.value);
  if (!v) {
    std::cerr << "rdmactor-kv: put " << cfg.key << ": "
              << rdmactor::render(v.error()) << std::endl;
    return 1;
  }
  std::cout << "stored " << cfg.key << " (version " << *v << ")" << std::endl;
  return 0;
}

int run_watch(caf::actor_system& sys, rdmactor::node& nd,
              const kv_config& cfg) {
  auto fail = [&](const std::string& what, const caf::error& err) {
    std::cerr << "rdmactor-kv: " << what << rdmactor::render(err) << std::endl;
    return 1;
  };
  auto svc = nd.remote_actor<service>(cfg.watch, service_name);
  if (!svc)
    return fail("", svc.error());
  auto wait = std::chrono::seconds(cfg.seconds);
  caf::scoped_actor self{sys};
  watcher w;
  caf::error err;
  self->request(*svc, wait, watch_atom::value, cfg.key)
      .receive([&](watcher& got) { w = std::move(got); },
               [&](caf::error& e) { err = std::move(e); });
  if (err)
    return fail("watch " + cfg.key + ": ", err);
  std::cout << "watching " << cfg.key << std::endl;
  for (uint32_t i = 0; i < cfg.count; ++i) {
    self->request(w, wait, next_atom::value)
        .receive(
            [&](uint64_t version, std::string& value) {
              std::cout << cfg.key << " = " << value << " (version " << version
                        << ")" << std::endl;
            },
            [&](caf::error& e) { err = std::move(e); });
    if (err)
      return fail("watch " + cfg.key + ": ", err);
  }
  return 0;
}

} // namespace kv

namespace {

/// Removes `--value=X` (or `--value X`) from argv and returns X: CAF 0.17's
/// parser refuses an empty `--value=`, and an empty value is a value.
std::optional<std::string> take_value(int& argc, char** argv) {
  std::optional<std::string> out;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--value=", 0) == 0)
      out = arg.substr(8);
    else if (arg == "--value" && i + 1 < argc)
      out = argv[++i];
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  return out;
}

} // namespace

int main(int argc, char** argv) {
  auto value = take_value(argc, argv);
  bool log_level_given = false;
  for (int i = 1; i < argc; ++i)
    log_level_given |= std::strncmp(argv[i], "--rdmactor.log-level", 20) == 0;
  kv::kv_config cfg;
  if (value)
    cfg.value = *value;
  if (auto err
      = cfg.parse(argc, argv, rdmactor::default_config_file().c_str())) {
    std::cerr << "rdmactor-kv: " << cfg.render(err) << "\n"
              << "run rdmactor-kv --help for the options\n";
    return 2;
  }
  if (cfg.cli_helptext_printed) {
    std::cout << "\n" << cfg.rdmactor_help();
    std::cout
        << "\nThe server keeps a table of " << kv::slot_bytes
        << "-byte slots in registered memory, read-only for\npeers, and "
           "lends it to each client as it connects; it publishes the actor\n"
           "\"kv\", the table's only writer. --get reads the key's slots "
           "with one-sided\nRDMA READ (the server's CPU is not involved), "
           "repeating a read that raced a\nput; --put is a request to the "
           "actor; --watch\nasks the actor for a subscription (an actor handle "
           "in "
           "the reply) and prints\nthe key's next --count puts. --bench prints "
           "its counts and, on\nits last line, the "
           "latency percentiles and gets/s. Exit status: 0 on success,\n"
           "1 when a key was not found or an operation failed, 2 for a usage "
           "error.\nEvery rdmactor.* option can be given as "
           "--rdmactor.NAME=VALUE.\n";
    return 0;
  }
  int modes = !cfg.serve.empty() + !cfg.get.empty() + !cfg.put.empty()
              + !cfg.watch.empty() + !cfg.bench.empty();
  if (modes != 1) {
    std::cerr << "rdmactor-kv: give exactly one of --serve, --get, --put, "
                 "--watch and --bench (see --help)\n";
    return 2;
  }
  if ((!cfg.get.empty() || !cfg.put.empty() || !cfg.watch.empty())
      && cfg.key.empty()) {
    std::cerr << "rdmactor-kv: --get, --put and --watch need --key\n";
    return 2;
  }
  if (!cfg.put.empty() && !value) {
    std::cerr << "rdmactor-kv: --put needs --value\n";
    return 2;
  }
  if (cfg.via != "rdma" && cfg.via != "actor" && cfg.via != "caf-io") {
    std::cerr << "rdmactor-kv: --via is rdma, actor or caf-io\n";
    return 2;
  }
  if (!cfg.caf_io.empty() && cfg.serve.empty()) {
    std::cerr << "rdmactor-kv: --caf-io is for --serve\n";
    return 2;
  }
  // CAF io, for the comparison only: load its middleman where it is used.
  if (!cfg.caf_io.empty() || cfg.via == "caf-io")
    cfg.load<caf::io::middleman>();
  auto opts = cfg.opts;
  if (!cfg.fabric.empty())
    opts.fabric = cfg.fabric;
  // Clients print results: only warnings from the library, unless told.
  if (cfg.serve.empty() && !log_level_given)
    opts.log_level = "warn";
  // The server waits for SIGINT/SIGTERM with sigwait: block them before the
  // actor system starts its threads, which inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (!cfg.serve.empty())
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  caf::actor_system sys{cfg};
  auto nd = rdmactor::node::open(sys, opts);
  if (!nd) {
    std::cerr << "rdmactor-kv: " << rdmactor::render(nd.error()) << std::endl;
    return 1;
  }
  int rc;
  if (!cfg.serve.empty())
    rc = kv::run_server(sys, **nd, cfg, stop_signals);
  else if (!cfg.get.empty())
    rc = kv::run_get(sys, **nd, cfg);
  else if (!cfg.put.empty())
    rc = kv::run_put(sys, **nd, cfg);
  else if (!cfg.watch.empty())
    rc = kv::run_watch(sys, **nd, cfg);
  else
    rc = kv::run_bench(sys, **nd, cfg);
  (*nd)->close();
  return rc;
}
