// rdmactor-replog's follower: joins the leader, lends it memory for the
// log (the leader fills it with RDMA WRITE) and checks every entry it is
// told about.  A follower that restarts joins again and catches up with
// one WRITE of everything it lacks.

#include <atomic>
#include <chrono>
#include <ctime>
#include <iostream>
#include <memory>
#include <random>
#include <string>

#include <caf/actor_cast.hpp>
#include <caf/actor_ostream.hpp>
#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "replog.hpp"
#include "replog_entry.hpp"

namespace replog {

namespace {

using start_atom = caf::atom_constant<caf::atom("rl_start")>;

/// The follower's actor: what the leader calls, plus the start from main
/// and the status main prints at the end (applied, commit, digest).
using follower_actor = follower_service::extend<
    caf::reacts_to<start_atom>,
    caf::replies_to<status_atom>::with<uint64_t, uint64_t, uint64_t>>;

/// What main waits for.
struct shared_flags {
  std::atomic<bool> ended{false}; ///< the leader went or the join failed
};

struct follower_state {
  uint32_t id = 0;
  uint64_t epoch = 0;
  std::string leader_address;
  log_service log;
  rdmactor::connection_actor conn;
  rdmactor::memory_pool_ptr pool;
  rdmactor::local_mr region;
  uint64_t capacity = 0;
  uint64_t applied = 0;
  uint64_t commit = 0;
  uint64_t leader_last = 0; ///< the leader's last entry when we joined
  bool caught_up = false;
  std::chrono::milliseconds timeout{5000};
  std::chrono::steady_clock::time_point joined_at;
  std::shared_ptr<shared_flags> flags;
  static inline const char* name = "replog.follower";
};

using follower_ptr = follower_actor::stateful_pointer<follower_state>;

void end(follower_ptr self, const std::string& why) {
  caf::aout(self) << "follower " << self->state.id << ": " << why << std::endl;
  self->state.flags->ended = true;
  self->quit();
}

/// Lends the leader memory for its whole log, tagged with our epoch.
void lend(follower_ptr self) {
  auto& st = self->state;
  // A registration of its own: the rkey the leader gets opens the log and
  // nothing else of this node.
  auto mr = st.pool->allocate_dedicated(
      st.capacity * entry_bytes,
      rdmactor::transport::access::local_write
          | rdmactor::transport::access::remote_write);
  if (!mr) {
    end(self, "cannot allocate the log: " + rdmactor::render(mr.error()));
    return;
  }
  st.region = *mr;
  self->request(st.conn, st.timeout, rdmactor::send_mr_atom_v, st.region,
                st.epoch)
      .then(
          [self](rdmactor::mr_token&) {
            auto& st = self->state;
            caf::aout(self)
                << "follower " << st.id << " joined the leader at "
                << st.leader_address << ": its log holds " << st.leader_last
                << " entries; lent it " << st.region.size()
                << " bytes for RDMA WRITE" << std::endl;
          },
          [self](caf::error& err) {
            end(self, "lending the log failed: " + rdmactor::render(err));
          });
}

follower_actor::behavior_type
follower_impl(follower_ptr self, uint32_t id, uint64_t epoch,
              std::string leader_address, log_service log,
              rdmactor::connection_actor conn, rdmactor::memory_pool_ptr pool,
              std::chrono::milliseconds timeout,
              std::shared_ptr<shared_flags> flags) {
  auto& st = self->state;
  st.id = id;
  st.epoch = epoch;
  st.leader_address = std::move(leader_address);
  st.log = std::move(log);
  st.conn = std::move(conn);
  st.pool = std::move(pool);
  st.timeout = timeout;
  st.flags = std::move(flags);
  self->monitor(st.log);
  self->set_down_handler([self](caf::down_msg& dm) {
    end(self, "the leader went (" + rdmactor::render(dm.reason) + ")");
  });
  return {
      [self](start_atom) {
        auto& st = self->state;
        st.joined_at = std::chrono::steady_clock::now();
        self->request(st.log, st.timeout, join_atom::value, st.id, st.epoch)
            .then(
                [self](uint64_t capacity, uint64_t last) {
                  auto& st = self->state;
                  if (capacity == 0 || capacity > (uint64_t{1} << 20)
                      || last > capacity) {
                    end(self, "the leader's join answer is out of range");
                    return;
                  }
                  st.capacity = capacity;
                  st.leader_last = last;
                  lend(self);
                },
                [self](caf::error& err) {
                  end(self, "join failed: " + rdmactor::render(err));
                });
      },
      [self](replicate_atom, uint64_t first, uint64_t last,
             uint64_t commit) -> caf::result<uint64_t> {
        auto& st = self->state;
        // The leader is a peer: check the range and every entry in it.
        if (!st.region.valid() || first == 0 || first > last
            || last > st.capacity || first > st.applied + 1)
          return rdmactor::make_error(
              rdmactor::errc::invalid_argument,
              "entries " + std::to_string(first) + ".." + std::to_string(last)
                  + " do not follow the " + std::to_string(st.applied)
                  + " held (capacity " + std::to_string(st.capacity) + ")");
        std::string value;
        for (auto i = first; i <= last; ++i)
          if (!read_entry(st.region.data() + (i - 1) * entry_bytes, i, value))
            return rdmactor::make_error(rdmactor::errc::invalid_argument,
                                        "entry " + std::to_string(i)
                                            + " fails its check");
        st.applied = std::max(st.applied, last);
        st.commit = std::max(st.commit, std::min(commit, st.applied));
        if (!st.caught_up && st.applied >= st.leader_last) {
          st.caught_up = true;
          auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - st.joined_at)
                        .count();
          caf::aout(self) << "follower " << st.id << " caught up to entry "
                          << st.applied << " in " << us / 1000 << " ms"
                          << std::endl;
        }
        return st.applied;
      },
      [self](status_atom) -> caf::result<uint64_t, uint64_t, uint64_t> {
        auto& st = self->state;
        auto d = st.region.valid() ? digest(st.region.data(), st.applied)
                                   : digest(nullptr, 0);
        return {st.applied, st.commit, d};
      },
  };
}

} // namespace

int run_follower(caf::actor_system& sys, rdmactor::node& nd,
                 const replog_config& cfg, sigset_t stop_signals) {
  auto fail = [](const std::string& what, const caf::error& err) {
    std::cerr << "rdmactor-replog: " << what << rdmactor::render(err)
              << std::endl;
    return 1;
  };
  if (cfg.id == 0 || cfg.id > 65535) {
    std::cerr << "rdmactor-replog: --follow needs --id=1..65535\n";
    return 2;
  }
  std::random_device rd;
  uint64_t epoch = 0;
  while (epoch == 0)
    epoch = (uint64_t{rd()} << 32) ^ rd();
  auto conn = nd.connect(cfg.follow);
  if (!conn)
    return fail("connecting to the leader: ", conn.error());
  auto timeout = std::chrono::milliseconds(nd.opts().request_timeout_ms);
  log_service log;
  caf::error lookup_err;
  {
    caf::scoped_actor self{sys};
    self->request(*conn, timeout, rdmactor::lookup_atom_v,
                  std::string{service_name},
                  rdmactor::interface_of<log_service>(sys))
        .receive(
            [&](caf::actor& proxy) {
              log = caf::actor_cast<log_service>(proxy);
            },
            [&](caf::error& err) { lookup_err = std::move(err); });
  }
  if (lookup_err)
    return fail("looking up the leader's log: ", lookup_err);
  auto flags = std::make_shared<shared_flags>();
  auto f = sys.spawn(follower_impl, cfg.id, epoch, cfg.follow, log, *conn,
                     nd.pool(), timeout, flags);
  caf::anon_send(f, start_atom::value);
  int sig = 0;
  while (sig <= 0 && !flags->ended) {
    timespec ts{0, 100 * 1000 * 1000};
    sig = sigtimedwait(&stop_signals, nullptr, &ts);
  }
  if (flags->ended) {
    nd.close();
    return 1;
  }
  uint64_t applied = 0, commit = 0, d = 0;
  {
    caf::scoped_actor self{sys};
    self->request(f, std::chrono::seconds(10), status_atom::value)
        .receive(
            [&](uint64_t a, uint64_t c, uint64_t dg) {
              applied = a;
              commit = c;
              d = dg;
            },
            [&](caf::error&) {});
  }
  std::cout << "follower " << cfg.id << " shutting down ("
            << (sig == SIGINT ? "SIGINT" : "SIGTERM")
            << "): applied=" << applied << " commit=" << commit
            << " digest=" << hex(d) << std::endl;
  caf::anon_send_exit(f, caf::exit_reason::user_shutdown);
  nd.close();
  return 0;
}

} // namespace replog
