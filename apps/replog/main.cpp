// rdmactor-replog: a replicated log on three or more nodes.
//
// The leader publishes the actor "log" and keeps the log in registered
// memory; each follower joins through the leader's proxy (remote actors
// for control), lends the leader memory for the whole log, and the leader
// copies every entry into it with one-sided RDMA WRITE (bulk data), then
// tells the follower, which checks the entries and confirms.  An append is
// answered once a majority of the cluster holds it.  A follower that is
// killed and restarted joins again and catches up with one WRITE.
//
//   rdmactor-replog --lead=HOST:PORT [--cluster=N] [--capacity=E]
//   rdmactor-replog --follow=HOST:PORT --id=I
//   rdmactor-replog --append=HOST:PORT --value=V
//   rdmactor-replog --status=HOST:PORT
//   rdmactor-replog --bench=HOST:PORT [--count=N] [--size=B] [--window=W]
//
// Only the installed API is used (<rdmactor/...>, CAF, std).

#include <cstring>
#include <iostream>
#include <string>

#include <pthread.h>

#include <caf/actor_system.hpp>
#include <caf/config_option_adder.hpp>

#include "replog.hpp"
#include "replog_entry.hpp"

namespace replog {

replog_config::replog_config() {
  caf::config_option_adder{custom_options_, "global"}
      .add(lead, "lead",
           "lead the cluster: serve the log on HOST:PORT (port 0: any) until "
           "SIGINT/SIGTERM")
      .add(follow, "follow",
           "follow the leader at HOST:PORT (with --id) until SIGINT/SIGTERM")
      .add(append, "append",
           "append --value to the log of the leader at HOST:PORT")
      .add(status, "status", "print the status of the leader at HOST:PORT")
      .add(bench, "bench",
           "append --count values of --size bytes to the leader at "
           "HOST:PORT, --window at a time")
      .add(value, "value", "the value to append: 1 to 240 bytes")
      .add(id, "id", "follower: its id, 1 to 65535, the same after a restart")
      .add(cluster, "cluster",
           "leader: nodes in the cluster, leader included (default 3); an "
           "entry commits on cluster/2 + 1 of them")
      .add(capacity, "capacity",
           "leader: entries the log holds (default 4096, 256 bytes each)")
      .add(commit_timeout_ms, "commit-timeout-ms",
           "leader: an append not committed within this fails with "
           "request_timeout (default 5000)")
      .add(count, "count", "bench: appends (default 1000)")
      .add(size, "size", "bench: bytes per value (default 100)")
      .add(window, "window", "bench: appends in flight (default 16)")
      .add(fabric, "fabric", "soft or verbs (default: rdmactor.fabric)");
}

} // namespace replog

int main(int argc, char** argv) {
  bool log_level_given = false;
  for (int i = 1; i < argc; ++i)
    log_level_given |= std::strncmp(argv[i], "--rdmactor.log-level", 20) == 0;
  replog::replog_config cfg;
  if (auto err
      = cfg.parse(argc, argv, rdmactor::default_config_file().c_str())) {
    std::cerr << "rdmactor-replog: " << cfg.render(err) << "\n"
              << "run rdmactor-replog --help for the options\n";
    return 2;
  }
  if (cfg.cli_helptext_printed) {
    std::cout << "\n" << cfg.rdmactor_help();
    std::cout
        << "\nThe leader publishes the actor \"log\" and keeps the log in "
           "registered memory.\nA follower joins through it, lends the "
           "leader memory for the whole log,\nand the leader copies each "
           "entry into it with one-sided RDMA WRITE, then\ntells the "
           "follower, which checks every entry (index, length, checksum)\n"
           "and confirms. An append is answered with its index once a "
           "majority of the\ncluster holds it; a restarted follower catches "
           "up with one WRITE. --status\nprints \"last=L commit=C digest=D "
           "followers=N ID:HELD...\"; a follower prints\nits own digest when "
           "it stops: equal digests, equal logs. Exit status: 0 on\n"
           "success, 1 when an operation failed (or, for a follower, the "
           "leader went),\n2 for a usage error. Every rdmactor.* option can "
           "be given as\n--rdmactor.NAME=VALUE.\n";
    return 0;
  }
  int modes = !cfg.lead.empty() + !cfg.follow.empty() + !cfg.append.empty()
              + !cfg.status.empty() + !cfg.bench.empty();
  if (modes != 1) {
    std::cerr << "rdmactor-replog: give exactly one of --lead, --follow, "
                 "--append, --status and --bench (see --help)\n";
    return 2;
  }
  if (!cfg.append.empty() && cfg.value.empty()) {
    std::cerr << "rdmactor-replog: --append needs --value\n";
    return 2;
  }
  auto opts = cfg.opts;
  if (!cfg.fabric.empty())
    opts.fabric = cfg.fabric;
  bool serves = !cfg.lead.empty() || !cfg.follow.empty();
  // Clients print results: only warnings from the library, unless told.
  if (!serves && !log_level_given)
    opts.log_level = "warn";
  // Leader and followers wait for SIGINT/SIGTERM with sigwait: block them
  // before the actor system starts its threads, which inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (serves)
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  caf::actor_system sys{cfg};
  auto nd = rdmactor::node::open(sys, opts);
  if (!nd) {
    std::cerr << "rdmactor-replog: " << rdmactor::render(nd.error())
              << std::endl;
    return 1;
  }
  int rc;
  if (!cfg.lead.empty())
    rc = replog::run_leader(sys, **nd, cfg, stop_signals);
  else if (!cfg.follow.empty())
    rc = replog::run_follower(sys, **nd, cfg, stop_signals);
  else
    rc = replog::run_client(sys, **nd, cfg);
  (*nd)->close();
  return rc;
}
