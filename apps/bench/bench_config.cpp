#include "apps/bench/bench_config.hpp"

#include <algorithm>
#include <cctype>

#include <caf/config_option_adder.hpp>

#include "apps/bench/caf_io_bench.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor::bench {

namespace {

/// Bytes a bw run moves by default, per size.
constexpr uint64_t default_bw_bytes = uint64_t{256} << 20;

caf::error bad(const std::string& what) {
  return make_error(errc::invalid_argument, what);
}

/// Parses "a,b,c" where an item may be a range "A..B" of powers of two.
bool parse_size_list(const std::string& str, std::vector<uint64_t>& out) {
  size_t pos = 0;
  while (pos <= str.size()) {
    auto comma = str.find(',', pos);
    auto item = str.substr(pos, comma == std::string::npos ? std::string::npos
                                                           : comma - pos);
    auto dots = item.find("..");
    if (dots != std::string::npos) {
      uint64_t lo = 0;
      uint64_t hi = 0;
      if (!parse_size(item.substr(0, dots), lo)
          || !parse_size(item.substr(dots + 2), hi) || lo == 0 || lo > hi)
        return false;
      for (uint64_t x = lo; x <= hi; x *= 2)
        out.push_back(x);
    } else {
      uint64_t x = 0;
      if (!parse_size(item, x))
        return false;
      out.push_back(x);
    }
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  return !out.empty();
}

} // namespace

bench_config::bench_config() {
  caf::config_option_adder{custom_options_, "global"}
      .add(op, "op",
           "send, write, read, raw, fetch_add, cas or connect (default: "
           "send)")
      .add(mode, "mode", "lat (ping-pong) or bw (window) (default: lat)")
      .add(size, "size",
           "payload bytes, e.g. 8, 4K, 1M (default: 8 for "
           "lat, 64K for bw)")
      .add(sizes, "sizes",
           "several sizes: 8,4K,64K or a range of powers of two 2..1M")
      .add(iters, "iters",
           "measured operations per size (default: 2000 for lat; for bw "
           "256 MiB worth, 200..20000)")
      .add(warmup, "warmup",
           "operations before measuring (default: iters/10, 10..500; in "
           "bw mode at least twice the window)")
      .add(window, "window", "outstanding operations in bw mode (default 32)")
      .add(fabric, "fabric",
           "soft or verbs (default: rdmactor.fabric; soft "
           "in one process)")
      .add(device, "device", "verbs device name (default: first)")
      .add(listen, "listen",
           "serve on HOST:PORT (raw endpoints on PORT+1) until SIGINT")
      .add(connect, "connect", "run against a server at HOST:PORT")
      .add(host, "host",
           "address both nodes use in one process (default 127.0.0.1)")
      .add(baseline, "baseline",
           "caf-io: measure CAF's remote actors (BASP over TCP) instead; "
           "tcp: the medium, plain TCP sockets (send and actor only)")
      .add(json, "json", "print one JSON object per run instead of a table")
      .add(timeout_ms, "timeout-ms",
           "the caf-io baseline and the remote-actor rows fail when no "
           "answer comes for this long (one watchdog per run, no CAF "
           "timeout per request); also the timeout of a --listen server's "
           "subscription to its connection (default 30000); rdmactor's "
           "connection calls need none: rdmactor.request-timeout-ms "
           "bounds them")
      .add(peers, "peers", "connect: connections to open (default 100)")
      .add(hold_ms, "hold-ms",
           "connect: hold the connections this long before measuring "
           "(default 0)")
      .add(connect_threads, "connect-threads",
           "connect: threads that open connections at once (default 1: "
           "one after another; node::connect is thread-safe)")
      .add(idle_peers, "idle-peers",
           "send, write, read: idle connections opened first (default 0)")
      .add(connections, "connections",
           "send, write, read: connections that run the pattern at once, "
           "each with its own driver; the row shows their sum (ops and "
           "bytes over the slowest one's measured time; default 1)")
      .add(plain_actors, "plain-actors",
           "spawn the bench's driver and echo server with CAF's spawn "
           "instead of rdmactor::spawn_with_scheduler_job (the default, "
           "as docs/data-handlers.md recommends for actors on a hot path)")
      .add(actor_echo, "actor-echo",
           "send lat: the echo server echoes from an actor subscribed to "
           "the connection's data instead of from a data handler inside "
           "the connection (the default; docs/data-handlers.md)")
      .add(actor_driver, "actor-driver",
           "send, write and read: the client's driver actor issues each "
           "operation (and takes each echo) instead of a data handler "
           "inside the connection (the default)")
      .add(stats, "stats",
           "send, write, read, actor: after the runs, print the client "
           "connection's counters to stderr (packed messages and frames "
           "sent, merged and piggybacked acknowledgements, actor acks): "
           "how well small messages were batched")
      .add(fork_server, "fork-server",
           "rdmactor without --listen/--connect: run the server node in a "
           "child process forked first (two processes on this machine, "
           "as the baselines always run; CPU counts both) instead of a "
           "second node in this process");
  caf_io::add_message_types(*this);
}

bool parse_size(const std::string& str, uint64_t& out) {
  if (str.empty() || !std::isdigit(static_cast<unsigned char>(str[0])))
    return false;
  size_t end = 0;
  unsigned long long x = 0;
  try {
    x = std::stoull(str, &end);
  } catch (...) {
    return false;
  }
  auto rest = str.substr(end);
  uint64_t mult = 1;
  if (rest == "K" || rest == "k" || rest == "KiB")
    mult = uint64_t{1} << 10;
  else if (rest == "M" || rest == "m" || rest == "MiB")
    mult = uint64_t{1} << 20;
  else if (rest == "G" || rest == "g" || rest == "GiB")
    mult = uint64_t{1} << 30;
  else if (!rest.empty())
    return false;
  out = x * mult;
  return true;
}

run_spec bench_plan::spec_for(uint64_t size) const {
  run_spec spec;
  spec.op = op;
  spec.mode = mode;
  spec.size = size;
  spec.window = mode == bench_mode::lat ? 1 : window;
  spec.op_timeout = op_timeout;
  spec.in_handler = !actor_driver;
  if (iters > 0)
    spec.iters = iters;
  else if (mode == bench_mode::lat)
    spec.iters = 2000;
  else
    spec.iters = std::clamp<uint64_t>(
        default_bw_bytes / std::max<uint64_t>(size, 1), 200, 20000);
  if (warmup >= 0) {
    spec.warmup = static_cast<uint64_t>(warmup);
  } else {
    spec.warmup = std::clamp<uint64_t>(spec.iters / 10, 10, 500);
    // bw: the warm-up fills the window twice, so the measured part starts
    // with every buffer the window needs touched (1 MiB at window 32 had 25
    // and measured the first touches of 32 MiB of receive arenas: 1.6-3.0
    // GB/s instead of 4.1-5.3).
    if (mode == bench_mode::bw)
      spec.warmup = std::max<uint64_t>(spec.warmup, 2 * uint64_t{spec.window});
  }
  return spec;
}

caf::expected<bench_plan> make_plan(const bench_config& cfg) {
  bench_plan plan;
  if (!parse_op(cfg.op, plan.op))
    return bad("--op must be send, write, read, raw, fetch_add, cas or "
               "connect (got '"
               + cfg.op + "')");
  if (!parse_mode(cfg.mode, plan.mode))
    return bad("--mode must be lat or bw (got '" + cfg.mode + "')");
  if (!cfg.size.empty() && !cfg.sizes.empty())
    return bad("give --size or --sizes, not both");
  if (!cfg.sizes.empty()) {
    if (!parse_size_list(cfg.sizes, plan.sizes))
      return bad("--sizes: expected a list like 8,4K,64K or a range 2..1M "
                 "(got '"
                 + cfg.sizes + "')");
  } else if (!cfg.size.empty()) {
    uint64_t x = 0;
    if (!parse_size(cfg.size, x))
      return bad("--size: expected bytes like 8, 4K or 1M (got '" + cfg.size
                 + "')");
    plan.sizes.push_back(x);
  } else {
    plan.sizes.push_back(
        plan.mode == bench_mode::lat || is_atomic(plan.op) ? 8 : 64 * 1024);
  }
  if (is_atomic(plan.op) && (plan.sizes.size() != 1 || plan.sizes.front() != 8))
    return bad("--op=" + cfg.op
               + " works on one 8-byte word: give --size=8 or no size");
  if (cfg.window == 0)
    return bad("--window must be at least 1");
  if (!cfg.baseline.empty() && cfg.baseline != "caf-io"
      && cfg.baseline != "tcp")
    return bad("--baseline must be caf-io or tcp (got '" + cfg.baseline + "')");
  if (!cfg.baseline.empty() && (plan.op == bench_op::raw || is_atomic(plan.op)))
    return bad("the " + cfg.baseline
               + " baseline has no raw or atomic counterpart; use "
                 "--op=send, write or read");
  if (cfg.baseline == "tcp" && plan.op != bench_op::send
      && plan.op != bench_op::actor && plan.op != bench_op::connect)
    return bad("the tcp baseline runs --op=send (ping-pong and pushes; "
               "--op=actor runs the same), not --op="
               + cfg.op);
  if (!cfg.listen.empty() && !cfg.connect.empty())
    return bad("give --listen or --connect, not both");
  if (cfg.timeout_ms == 0)
    return bad("--timeout-ms must be at least 1");
  if (cfg.connect_threads == 0 || cfg.connect_threads > 256)
    return bad("--connect-threads must be 1 to 256");
  if (plan.op == bench_op::connect && cfg.peers == 0)
    return bad("--peers must be at least 1");
  if (plan.op == bench_op::connect && !cfg.baseline.empty())
    return bad("--op=connect measures rdmactor only; drop --baseline");
  if (cfg.idle_peers > 0
      && (plan.op == bench_op::raw || plan.op == bench_op::connect
          || !cfg.baseline.empty()))
    return bad("--idle-peers applies to rdmactor's send, write and read");
  if (cfg.connections == 0 || cfg.connections > 256)
    return bad("--connections must be 1 to 256");
  if (cfg.connections > 1
      && (plan.op == bench_op::raw || plan.op == bench_op::connect
          || plan.op == bench_op::actor || !cfg.baseline.empty()))
    return bad("--connections applies to rdmactor's send, write and read");
  if (cfg.fork_server && !cfg.baseline.empty())
    return bad("--fork-server applies to rdmactor; the " + cfg.baseline
               + " baseline forks its server already");
  if (cfg.fork_server && (!cfg.listen.empty() || !cfg.connect.empty()))
    return bad("--fork-server runs both processes itself; drop --listen "
               "and --connect");
  plan.peers = cfg.peers;
  plan.hold_ms = cfg.hold_ms;
  plan.connect_threads = cfg.connect_threads;
  plan.idle_peers = cfg.idle_peers;
  plan.connections = cfg.connections;
  plan.plain_actors = cfg.plain_actors;
  plan.actor_echo = cfg.actor_echo;
  plan.actor_driver = cfg.actor_driver;
  plan.stats = cfg.stats;
  plan.fork_server = cfg.fork_server;
  plan.iters = cfg.iters;
  plan.warmup = cfg.warmup;
  plan.window = cfg.window;
  plan.op_timeout = std::chrono::milliseconds{cfg.timeout_ms};
  plan.json = cfg.json;
  plan.baseline = cfg.baseline;
  plan.listen = cfg.listen;
  plan.connect = cfg.connect;
  plan.host = cfg.host;
  plan.opts = cfg.opts;
  if (!cfg.fabric.empty())
    plan.opts.fabric = cfg.fabric;
  if (!cfg.device.empty())
    plan.opts.device = cfg.device;
  if (plan.in_process() && plan.opts.fabric == "auto")
    plan.opts.fabric = "soft";
  return plan;
}

} // namespace rdmactor::bench
