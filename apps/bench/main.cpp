// rdmactor-bench: perftest-style latency and bandwidth of rdmactor's
// operations, and the same patterns over CAF io remote actors.

#include <cstdio>
#include <iostream>

#include "apps/bench/bench_config.hpp"
#include "apps/bench/runners.hpp"
#include "rdmactor/error.hpp"

namespace {

const char* help_epilog = R"(
Operations (--op): send = connection send_data, taken by the peer as a
data subscriber (subscribe_data: chunks pushed, as CAF io pushes
messages; agent protocol); write, read = one-sided RDMA on a remote_mr from
request_remote_mr; raw = transport actor sends without the agent;
fetch_add, cas = one-sided atomics on the first 8-byte word of a remote_mr
from request_remote_mr (fetch_add adds 1; cas compares with 0 and swaps
in 0; size 8 only).
connect = scale: --peers connections opened one after another (or from
--connect-threads threads at once; connect times), held --hold-ms, 8 bytes
echoed on each (at most 4096 at a time), then closed, with this
process's threads, RSS, registered bytes and fds while holding and its CPU
time during the hold (a --listen server prints its own whenever they
change, and its CPU once the number of connections stayed 1 s, then every
5 s). --idle-peers=N opens N idle connections before a send, write or
read run.
actor = remote actors: the caf-io baseline's server actor (echo of a
std::vector<uint8_t>, pushes answered with the byte count) published on
the server node, driven through the proxy a lookup gives (lat: ping-pong;
bw: --window pushes); --baseline=caf-io --op=actor runs the very same
actors over caf::io.
Modes (--mode): lat = one at a time (send and raw: ping-pong, half the
round trip as perftest reports it; write, read, fetch_add and cas:
completion time of one operation); bw = --window outstanding operations,
MB/s (MB = 2^20 bytes, as perftest) and operations/s.

Without --listen/--connect both nodes run in this process, or with
--fork-server the server node in a child process this one forks first (two
processes from one command, as the baselines run; scripts/bench.sh's host
rows). Two processes by hand:
  rdmactor-bench --listen=127.0.0.1:7480 &
  rdmactor-bench --connect=127.0.0.1:7480 --op=send --mode=lat
(a server serves connections on PORT and raw endpoints on PORT+1).

--baseline=caf-io runs the same patterns between two CAF actor systems
connected by caf::io remote actors over TCP (a forked server process on
loopback unless --listen/--connect): send lat = echo of a
std::vector<uint8_t>, send/write bw = pushes answered with the byte count,
read = pulls of SIZE bytes.

--baseline=tcp runs send (and actor) over one plain TCP connection between
two processes, the medium itself: a 5-byte header and the payload in one
writev per message (TCP_NODELAY); lat = echo, bw = --window pushes, each
answered with its byte count, the server answering every message of one
read in one write.

Memory a server spends because a client asks is capped per connection:
AllocMR (request_remote_mr) by rdmactor.peer-max-alloc-bytes, data not yet
taken by rdmactor.peer-max-queued-bytes; the rdmactor server reads no region
a client lends. The caf-io server allocates what a read names (pulls) only
up to rdmactor.peer-max-claim-bytes (default 64 MiB). Over a cap the client
gets quota_exceeded and the server keeps serving.

Examples:
  rdmactor-bench --op=send --mode=lat --sizes=8,4K
  rdmactor-bench --op=send --mode=bw --size=8 --iters=100000 --fork-server
  rdmactor-bench --op=write --mode=bw --sizes=64K,1M --json
  rdmactor-bench --baseline=caf-io --op=send --mode=bw --size=64K
  rdmactor-bench --op=actor --mode=lat --size=8
  rdmactor-bench --baseline=caf-io --op=actor --mode=lat --size=8
  rdmactor-bench --baseline=tcp --op=send --mode=bw --size=8 --window=256
CAF's scheduler options apply, e.g.
  --work-stealing.aggressive-poll-attempts=1000000  (spins: lower latency,
  burns cores; do not spin in two processes on a 2-core machine)
Every rdmactor.* option of config/rdmactor.ini can be given as
--rdmactor.NAME=VALUE.
)";

} // namespace

int main(int argc, char** argv) {
  rdmactor::bench::bench_config cfg;
  if (auto err
      = cfg.parse(argc, argv, rdmactor::default_config_file().c_str())) {
    std::cerr << "rdmactor-bench: " << cfg.render(err) << "\n"
              << "run rdmactor-bench --help for the options\n";
    return 2;
  }
  if (cfg.cli_helptext_printed) {
    std::cout << "\n" << cfg.rdmactor_help() << help_epilog;
    return 0;
  }
  auto plan = rdmactor::bench::make_plan(cfg);
  if (!plan) {
    std::cerr << "rdmactor-bench: " << rdmactor::render(plan.error()) << "\n";
    return 2;
  }
  if (plan->baseline == "caf-io")
    return rdmactor::bench::run_caf_io(cfg, *plan);
  if (plan->baseline == "tcp")
    return rdmactor::bench::run_tcp(cfg, *plan);
  return rdmactor::bench::run_rdmactor(cfg, *plan);
}
