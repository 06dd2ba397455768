// rdmactor-hostile-probe: plays one hostile peer against a running node,
// from its own process, so that the node's resident size can be measured
// from outside (scripts/hostile-rss.sh; docs/security.md, "Resident size
// under attack").
// Soft fabric only: it speaks through a bare transport (no agent).
//
//   rdmactor-hostile-probe --connect=HOST:PORT --attack=partials
//       [--name=calculator] [--connections=2] [--mib=48] [--hold-ms=10000]
//     On each connection: Hello with remote actors, look NAME up, send the
//     first MIB MiB of a chunked request of MIB+1 MiB to it and never the
//     rest; answer the node's Pings for HOLD-MS, then close.
//   rdmactor-hostile-probe --connect=HOST:PORT --attack=no-credits
//       [--seconds=20]
//     Send Pings into the node's receives and never return a credit (the
//     receives it reposts are never posted again) until the node ends the
//     connection or SECONDS pass.
//
// Prints one line per step ("sent ...", "held ...", "ended ...") and exits
// 0 when the attack ran to its end (the node's answer included), 1 when it
// could not start (no connection, the name unknown), 2 for a usage error.

#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/config.hpp"
#include "rdmactor/detail/transport_actor.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/memory_pool.hpp"
#include "rdmactor/options.hpp"
#include "rdmactor/testing.hpp"
#include "test/actors/raw_forwarder.hpp"

namespace {

using namespace rdmactor;
namespace pb = rdmactor::protocol;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

struct probe_args {
  std::string host;
  uint16_t port = 0;
  std::string attack;
  std::string name = "calculator";
  int connections = 2;
  uint64_t mib = 48;
  int64_t hold_ms = 10000;
  int64_t seconds = 20;
};

constexpr const char* usage
    = "usage: rdmactor-hostile-probe --connect=HOST:PORT "
      "--attack=partials|no-credits\n"
      "         [--name=NAME] [--connections=N] [--mib=M] [--hold-ms=MS]\n"
      "         [--seconds=S]\n"
      "Plays one hostile peer (soft fabric) against the node at HOST:PORT:\n"
      "  partials    on N connections, the first M MiB of a chunked request\n"
      "              to the actor published as NAME, never the rest; Pings\n"
      "              answered for MS ms, then the connections close\n"
      "  no-credits  Pings that never return a credit, for at most S s\n";

bool parse(int argc, char** argv, probe_args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* key) -> const char* {
      auto n = std::strlen(key);
      return arg.compare(0, n, key) == 0 ? argv[i] + n : nullptr;
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << usage;
      std::exit(0);
    }
    try {
      if (auto v = value("--connect=")) {
        std::string hp = v;
        auto colon = hp.rfind(':');
        if (colon == std::string::npos)
          return false;
        a.host = hp.substr(0, colon);
        a.port = static_cast<uint16_t>(std::stoul(hp.substr(colon + 1)));
      } else if (auto v = value("--attack=")) {
        a.attack = v;
      } else if (auto v = value("--name=")) {
        a.name = v;
      } else if (auto v = value("--connections=")) {
        a.connections = std::stoi(v);
      } else if (auto v = value("--mib=")) {
        a.mib = std::stoull(v);
      } else if (auto v = value("--hold-ms=")) {
        a.hold_ms = std::stoll(v);
      } else if (auto v = value("--seconds=")) {
        a.seconds = std::stoll(v);
      } else {
        return false;
      }
    } catch (const std::exception&) {
      return false;
    }
  }
  return !a.host.empty() && a.port != 0
         && (a.attack == "partials" || a.attack == "no-credits")
         && a.connections > 0 && a.mib > 0;
}

options probe_options() {
  options o;
  o.fabric = "soft";
  o.max_message_len_bytes = 4096;
  o.recv_depth = 16;
  return o;
}

/// One connection of the `partials` attack: a bare transport whose frames
/// reach `inbox`.
class partial_peer {
public:
  partial_peer(caf::actor_system& sys, const options& opts)
      : sys_(sys), opts_(opts), inbox_(sys) {}

  ~partial_peer() {
    if (tr_)
      caf::anon_send_exit(tr_, caf::exit_reason::user_shutdown);
  }

  caf::error connect(const probe_args& a) {
    auto d = transport::open_device(opts_);
    if (!d)
      return d.error();
    dev_ = *d;
    pool_ = std::make_shared<memory_pool>(dev_, 1 << 20, 64 << 20);
    auto qp = dev_->connect(a.host, a.port,
                            {opts_.max_message_len_bytes, opts_.recv_depth},
                            milliseconds(5000));
    if (!qp)
      return qp.error();
    tr_ = transport::spawn_transport(sys_, dev_, std::move(*qp));
    auto fwd
        = sys_.spawn(test::raw_forwarder, caf::actor_cast<caf::actor>(inbox_));
    auto linked = testing::call<transport::link_params>(
        sys_, tr_, transport::subscribe_atom::value, fwd);
    if (!linked)
      return linked.error();
    slot_ = linked->max_message_len_bytes;
    return send(pb::make_hello(pb::protocol_version,
                               opts_.max_message_len_bytes, opts_.recv_depth,
                               true, pb::EXT_REMOTE_ACTORS));
  }

  /// Looks `name` up; returns its actor id (0: not published).
  caf::expected<uint64_t> lookup(const std::string& name) {
    pb::Message m;
    m.mutable_request()->set_request_id(next_id_++);
    m.mutable_request()->mutable_actor_lookup()->set_name(name);
    if (auto err = send(m))
      return err;
    auto deadline = steady_clock::now() + std::chrono::seconds(10);
    while (steady_clock::now() < deadline) {
      pb::Message in;
      if (!take(in, milliseconds(100)))
        continue;
      if (in.has_response() && in.response().has_actor_lookup())
        return in.response().actor_lookup().actor_id();
    }
    return make_error(errc::request_timeout, "no answer to the lookup");
  }

  /// Sends the first `bytes` of a chunked request of `total` bytes to
  /// `target`, in chunks that fill a frame.
  caf::error send_partial(uint64_t target, uint64_t bytes, uint64_t total) {
    constexpr uint64_t request_mid = 0x1000000000000001ull;
    uint64_t sent = 0;
    size_t chunk = slot_ - 256;
    while (sent < bytes) {
      auto len = std::min<uint64_t>(chunk, bytes - sent);
      pb::Message m;
      auto* am = m.mutable_actor_message();
      am->set_target(target);
      am->set_sender(7);
      am->set_message_id(request_mid);
      am->set_len(len);
      if (sent == 0)
        am->set_total_len(total);
      if (auto err = send(m, len))
        return err;
      sent += len;
      answer_pings(milliseconds(0));
    }
    return {};
  }

  /// Answers the node's Pings for `d` (0: what waits now).
  void answer_pings(milliseconds d) {
    auto deadline = steady_clock::now() + d;
    do {
      pb::Message in;
      if (!take(in, d.count() == 0 ? milliseconds(0) : milliseconds(10)))
        continue;
      if (in.has_request() && in.request().has_ping())
        send(pb::make_pong(in.request().request_id()));
    } while (steady_clock::now() < deadline);
  }

  const caf::error& down() const {
    return down_;
  }

private:
  caf::error send(const pb::Message& msg, size_t payload_len = 0) {
    std::vector<uint8_t> buf(pb::frame_header_len + msg.ByteSizeLong());
    auto res = pb::encode(msg, buf.data(), buf.size(), slot_);
    if (res.code != errc::none)
      return make_error(res.code, "cannot encode a frame");
    buf.resize(res.header_len);
    local_mr payload;
    if (payload_len > 0) {
      auto mr = pool_->allocate(payload_len, 8, transport::access::local_write);
      if (!mr)
        return mr.error();
      std::memset(mr->data(), 0x5a, payload_len);
      payload = *mr;
    }
    auto n = testing::call<uint64_t>(sys_, tr_, transport::send_atom::value,
                                     std::move(buf), payload);
    return n ? caf::error{} : n.error();
  }

  /// Takes one frame from the node within `d`; false when none came.
  bool take(pb::Message& out, milliseconds d) {
    bool got = false;
    inbox_->receive(
        [&](transport::recv_atom, local_mr& mr) {
          auto r = pb::decode(mr.data(), mr.size(), slot_, out);
          got = r.code == errc::none;
        },
        [&](transport::imm_arrived_atom, uint32_t, uint32_t) {},
        [&](transport::qp_down_atom, caf::error& e) { down_ = e; },
        caf::after(d) >> [] {});
    return got;
  }

  caf::actor_system& sys_;
  options opts_;
  caf::scoped_actor inbox_;
  transport::device_ptr dev_;
  memory_pool_ptr pool_;
  transport::transport_actor tr_;
  uint32_t slot_ = 0;
  uint64_t next_id_ = 1000;
  caf::error down_;
};

int run_partials(caf::actor_system& sys, const probe_args& a) {
  auto opts = probe_options();
  std::vector<std::unique_ptr<partial_peer>> peers;
  uint64_t bytes = a.mib << 20;
  for (int i = 0; i < a.connections; ++i) {
    auto p = std::make_unique<partial_peer>(sys, opts);
    if (auto err = p->connect(a)) {
      std::cerr << "cannot connect: " << render(err) << "\n";
      return 1;
    }
    auto target = p->lookup(a.name);
    if (!target || *target == 0) {
      std::cerr << "cannot look up \"" << a.name
                << "\": " << (target ? "not published" : render(target.error()))
                << "\n";
      return 1;
    }
    auto t0 = steady_clock::now();
    if (auto err = p->send_partial(*target, bytes, bytes + (1 << 20))) {
      std::cout << "connection " << i << ": sending stopped: " << render(err)
                << "\n";
    } else {
      auto ms
          = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0);
      std::cout << "sent " << a.mib << " MiB of a " << a.mib + 1
                << " MiB request on connection " << i << " in " << ms.count()
                << " ms" << std::endl;
    }
    peers.push_back(std::move(p));
  }
  auto deadline = steady_clock::now() + milliseconds(a.hold_ms);
  while (steady_clock::now() < deadline)
    for (auto& p : peers)
      p->answer_pings(milliseconds(20));
  std::cout << "held " << a.hold_ms << " ms answering Pings" << std::endl;
  for (size_t i = 0; i < peers.size(); ++i)
    if (peers[i]->down())
      std::cout << "connection " << i
                << " ended by the node: " << render(peers[i]->down()) << "\n";
  peers.clear();
  std::cout << "ended: connections closed" << std::endl;
  return 0;
}

int run_no_credits(const probe_args& a) {
  auto opts = probe_options();
  auto d = transport::open_device(opts);
  if (!d) {
    std::cerr << "cannot open the soft fabric: " << render(d.error()) << "\n";
    return 1;
  }
  auto dev = *d;
  auto qp = dev->connect(a.host, a.port,
                         {opts.max_message_len_bytes, opts.recv_depth},
                         milliseconds(5000));
  if (!qp) {
    std::cerr << "cannot connect: " << render(qp.error()) << "\n";
    return 1;
  }
  auto& raw = **qp;
  auto depth = raw.params().recv_depth;
  auto slot = raw.params().max_message_len_bytes;
  // Receives for what the node may send with the credits it starts with;
  // never reposted.
  std::vector<uint8_t> rx(size_t{slot} * depth);
  auto rx_reg = dev->register_memory(rx.data(), rx.size(),
                                     transport::access::local_write);
  if (!rx_reg)
    return 1;
  constexpr uint64_t recv_bit = uint64_t{1} << 63;
  for (uint32_t i = 0; i < depth; ++i) {
    transport::sge sg{reinterpret_cast<uint64_t>(rx.data() + size_t{i} * slot),
                      slot, (*rx_reg)->lkey()};
    if (raw.post_recv(recv_bit | i, &sg, 1))
      return 1;
  }
  auto ping = pb::make_ping(1);
  std::vector<uint8_t> frame(pb::frame_header_len + ping.ByteSizeLong());
  auto enc = pb::encode(ping, frame.data(), frame.size(), slot);
  auto tx_reg = dev->register_memory(frame.data(), enc.header_len, 0);
  if (enc.code != errc::none || !tx_reg)
    return 1;
  transport::sge tx{reinterpret_cast<uint64_t>(frame.data()),
                    static_cast<uint32_t>(enc.header_len), (*tx_reg)->lkey()};
  uint64_t placed = 0;
  auto deadline = steady_clock::now() + std::chrono::seconds(a.seconds);
  bool ended = false;
  for (uint64_t wr = 1; !ended && steady_clock::now() < deadline; ++wr) {
    if (raw.post_send(wr, &tx, 1, uint32_t{0}, true))
      break;
    for (bool done = false; !done && !ended;) {
      transport::work_completion wcs[16];
      auto n = raw.poll_cq(wcs, 16);
      for (size_t i = 0; i < n; ++i) {
        if (wcs[i].wr_id & recv_bit)
          continue;
        if (wcs[i].status != transport::wc_status::success)
          ended = true;
        else if (wcs[i].wr_id == wr) {
          ++placed;
          done = true;
        }
      }
      if (n == 0) {
        if (raw.in_error() || steady_clock::now() > deadline)
          ended = true;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }
  std::cout << "sent " << placed << " Pings without a credit (receive depth "
            << depth << ")\n";
  std::cout << (raw.in_error() ? "ended: the node closed the connection"
                               : "ended: time is up, the connection stayed")
            << std::endl;
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  probe_args a;
  if (!parse(argc, argv, a)) {
    std::cerr << usage;
    return 2;
  }
  if (a.attack == "no-credits")
    return run_no_credits(a);
  rdmactor::config cfg;
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system sys{cfg};
  return run_partials(sys, a);
}
