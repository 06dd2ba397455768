// rdmactor-replog's leader: the log in registered memory, the published
// "log" actor that appends to it and replicates every entry into each
// follower's memory with one-sided RDMA WRITE, and the bookkeeping that
// commits an entry once a majority holds it.

#include <algorithm>
#include <chrono>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_ostream.hpp>
#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "replog.hpp"
#include "replog_entry.hpp"

namespace replog {

namespace {

using tick_atom = caf::atom_constant<caf::atom("rl_tick")>;

/// The leader's actor: the published interface, plus the accepted
/// connections from the node and its own commit-timeout tick.
using leader_actor = log_service::extend<
    caf::reacts_to<rdmactor::accepted_atom, rdmactor::connection_actor>,
    caf::reacts_to<tick_atom>>;

/// The most bytes of one WRITE (rxe's max_wr_bytes is 8 MiB).
constexpr uint64_t max_write_bytes = 4 << 20;

/// What the leader knows of one follower.
struct follower_info {
  uint64_t epoch = 0;              ///< the follower process's random epoch
  follower_service proxy;          ///< the follower's actor (its join's sender)
  rdmactor::connection_actor conn; ///< the connection that lent `region`
  rdmactor::remote_mr region;      ///< the follower's memory for the log
  uint64_t match = 0;              ///< entries 1..match confirmed
  uint64_t next = 1;               ///< first entry of the next WRITE
  bool busy = false;               ///< a WRITE or its replicate in flight
  uint64_t writes = 0;             ///< WRITEs done
  uint64_t bytes = 0;              ///< bytes written
};

/// A region lent before its follower's join arrived.
struct lent_region {
  rdmactor::connection_actor conn;
  rdmactor::remote_mr region;
};

struct pending_append {
  uint64_t index;
  caf::typed_response_promise<uint64_t> rp;
  std::chrono::steady_clock::time_point deadline;
};

struct leader_state {
  rdmactor::local_mr log;
  uint64_t capacity = 0;
  uint64_t last = 0;
  uint64_t commit = 0;
  uint32_t cluster = 1;
  std::chrono::milliseconds commit_timeout{5000};
  std::chrono::milliseconds request_timeout{5000};
  std::map<uint32_t, follower_info> followers;
  std::map<uint64_t, lent_region> regions; ///< by epoch
  std::vector<rdmactor::connection_actor> connections;
  std::deque<pending_append> pending;
  bool ticking = false;
  static inline const char* name = "replog.leader";

  /// Followers needed besides the leader for a majority.
  uint32_t needed() const {
    return cluster / 2;
  }
};

using leader_ptr = leader_actor::stateful_pointer<leader_state>;

std::string render(const caf::error& err) {
  return rdmactor::render(err);
}

/// Commits what a majority holds and answers the appends it covers.
void advance_commit(leader_ptr self) {
  auto& st = self->state;
  std::vector<uint64_t> matches;
  for (auto& kv : st.followers)
    matches.push_back(kv.second.match);
  std::sort(matches.rbegin(), matches.rend());
  uint64_t held = 0;
  if (st.needed() == 0)
    held = st.last;
  else if (matches.size() >= st.needed())
    held = matches[st.needed() - 1];
  st.commit = std::max(st.commit, std::min(held, st.last));
  while (!st.pending.empty() && st.pending.front().index <= st.commit) {
    st.pending.front().rp.deliver(st.pending.front().index);
    st.pending.pop_front();
  }
}

void drop(leader_ptr self, uint32_t id, uint64_t epoch, const caf::error& why) {
  auto& st = self->state;
  auto i = st.followers.find(id);
  if (i == st.followers.end() || i->second.epoch != epoch)
    return;
  caf::aout(self) << "follower " << id << " left (" << render(why)
                  << ") holding " << i->second.match << " entries; "
                  << st.followers.size() - 1 << " followers" << std::endl;
  st.followers.erase(i);
}

void pump(leader_ptr self, uint32_t id);

/// Tells follower `id` that entries first..last are in its memory.
void announce(leader_ptr self, uint32_t id, uint64_t epoch, uint64_t first,
              uint64_t last) {
  auto& st = self->state;
  auto i = st.followers.find(id);
  if (i == st.followers.end() || i->second.epoch != epoch)
    return;
  self->request(i->second.proxy, st.request_timeout, replicate_atom::value,
                first, last, st.commit)
      .then(
          [self, id, epoch, last](uint64_t applied) {
            auto& st = self->state;
            auto j = st.followers.find(id);
            if (j == st.followers.end() || j->second.epoch != epoch)
              return;
            auto& f = j->second;
            f.busy = false;
            f.match = std::max(f.match, std::min(applied, last));
            f.next = f.match + 1;
            advance_commit(self);
            pump(self, id);
          },
          [self, id, epoch](caf::error& err) { drop(self, id, epoch, err); });
}

/// Copies the entries follower `id` lacks into its memory with one WRITE
/// (at most max_write_bytes), unless one is in flight.
void pump(leader_ptr self, uint32_t id) {
  auto& st = self->state;
  auto i = st.followers.find(id);
  if (i == st.followers.end())
    return;
  auto& f = i->second;
  if (f.busy || !f.region.valid() || !f.proxy || f.next > st.last)
    return;
  auto first = f.next;
  auto last = std::min(st.last, first - 1 + max_write_bytes / entry_bytes);
  auto offset = (first - 1) * entry_bytes;
  auto len = (last - first + 1) * entry_bytes;
  auto src = st.log.slice(offset, len);
  auto dst = f.region.slice(offset, len);
  if (!src || !dst) {
    drop(self, id, f.epoch, src ? dst.error() : src.error());
    return;
  }
  f.busy = true;
  auto epoch = f.epoch;
  self->request(f.conn, st.request_timeout, rdmactor::write_atom_v, *src, *dst)
      .then(
          [self, id, epoch, first, last](uint64_t bytes) {
            auto& st = self->state;
            auto j = st.followers.find(id);
            if (j == st.followers.end() || j->second.epoch != epoch)
              return;
            j->second.writes += 1;
            j->second.bytes += bytes;
            announce(self, id, epoch, first, last);
          },
          [self, id, epoch](caf::error& err) { drop(self, id, epoch, err); });
}

void pump_all(leader_ptr self) {
  std::vector<uint32_t> ids;
  for (auto& kv : self->state.followers)
    ids.push_back(kv.first);
  for (auto id : ids)
    pump(self, id);
}

/// Installs a lent region for the follower that joined with `epoch`, or
/// keeps it until that join arrives.
void take_region(leader_ptr self, uint64_t epoch,
                 rdmactor::connection_actor conn, rdmactor::remote_mr region) {
  auto& st = self->state;
  if (region.size() < st.capacity * entry_bytes) {
    caf::aout(self) << "ignored a region of " << region.size()
                    << " bytes: the log needs " << st.capacity * entry_bytes
                    << std::endl;
    return;
  }
  for (auto& kv : st.followers) {
    auto& f = kv.second;
    if (f.epoch == epoch && !f.region.valid()) {
      f.conn = std::move(conn);
      f.region = std::move(region);
      caf::aout(self) << "follower " << kv.first << " lent " << f.region.size()
                      << " bytes; writing entries 1 to " << st.last
                      << std::endl;
      pump(self, kv.first);
      return;
    }
  }
  st.regions[epoch] = lent_region{std::move(conn), std::move(region)};
}

void arm_tick(leader_ptr self) {
  auto& st = self->state;
  if (st.ticking || st.pending.empty())
    return;
  st.ticking = true;
  self->delayed_send(self, std::chrono::milliseconds(100), tick_atom::value);
}

std::string status_line(leader_ptr self) {
  auto& st = self->state;
  std::ostringstream out;
  out << "last=" << st.last << " commit=" << st.commit
      << " digest=" << hex(digest(st.log.data(), st.last))
      << " followers=" << st.followers.size();
  for (auto& kv : st.followers)
    out << " " << kv.first << ":" << kv.second.match;
  return out.str();
}

leader_actor::behavior_type
leader_impl(leader_ptr self, rdmactor::local_mr log, uint64_t capacity,
            uint32_t cluster, std::chrono::milliseconds commit_timeout,
            std::chrono::milliseconds req_timeout) {
  auto& st = self->state;
  st.log = std::move(log);
  st.capacity = capacity;
  st.cluster = cluster;
  st.commit_timeout = commit_timeout;
  st.request_timeout = req_timeout;
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    auto& cs = st.connections;
    cs.erase(std::remove_if(cs.begin(), cs.end(),
                            [&](const rdmactor::connection_actor& c) {
                              return c.address() == dm.source;
                            }),
             cs.end());
    for (auto i = st.regions.begin(); i != st.regions.end();) {
      if (i->second.conn.address() == dm.source)
        i = st.regions.erase(i);
      else
        ++i;
    }
    std::vector<std::pair<uint32_t, uint64_t>> gone;
    for (auto& kv : st.followers)
      if (kv.second.proxy.address() == dm.source
          || kv.second.conn.address() == dm.source)
        gone.emplace_back(kv.first, kv.second.epoch);
    for (auto& g : gone)
      drop(self, g.first, g.second, dm.reason);
  });
  return {
      [self](append_atom, const std::string& value) -> caf::result<uint64_t> {
        auto& st = self->state;
        if (value.empty() || value.size() > value_max_bytes)
          return rdmactor::make_error(
              rdmactor::errc::invalid_argument,
              "values have 1 to " + std::to_string(value_max_bytes)
                  + " bytes; this one has " + std::to_string(value.size()));
        if (st.last == st.capacity)
          return rdmactor::make_error(
              rdmactor::errc::out_of_memory,
              "the log is full: its " + std::to_string(st.capacity)
                  + " entries are used; start the leader with a larger "
                    "--capacity");
        auto index = st.last + 1;
        write_entry(st.log.data() + st.last * entry_bytes, index, value);
        st.last = index;
        auto rp = self->make_response_promise<uint64_t>();
        st.pending.push_back(pending_append{
            index, rp, std::chrono::steady_clock::now() + st.commit_timeout});
        advance_commit(self);
        pump_all(self);
        arm_tick(self);
        return rp;
      },
      [self](join_atom, uint32_t id,
             uint64_t epoch) -> caf::result<uint64_t, uint64_t> {
        auto& st = self->state;
        auto sender = caf::actor_cast<follower_service>(self->current_sender());
        if (id == 0 || epoch == 0 || !sender)
          return rdmactor::make_error(
              rdmactor::errc::invalid_argument,
              "a join names a follower id and an epoch other than 0, and "
              "comes from the follower's actor");
        if (auto i = st.followers.find(id); i != st.followers.end())
          drop(self, id, i->second.epoch,
               rdmactor::make_error(rdmactor::errc::closed,
                                    "replaced by a new process with its id"));
        follower_info f;
        f.epoch = epoch;
        f.proxy = sender;
        self->monitor(sender);
        auto r = st.regions.find(epoch);
        if (r != st.regions.end()) {
          f.conn = std::move(r->second.conn);
          f.region = std::move(r->second.region);
          st.regions.erase(r);
        }
        st.followers.emplace(id, std::move(f));
        caf::aout(self) << "follower " << id << " joined; "
                        << st.followers.size() << " followers" << std::endl;
        pump(self, id);
        return {st.capacity, st.last};
      },
      [self](status_atom) { return status_line(self); },
      [self](rdmactor::accepted_atom, rdmactor::connection_actor& conn) {
        auto& st = self->state;
        self->monitor(conn);
        st.connections.push_back(conn);
        // A follower lends its memory on its connection right after its
        // join; clients never do, and their receive ends with the
        // connection or after request_timeout_ms.
        self->request(conn, st.request_timeout,
                      rdmactor::receive_tagged_remote_mr_atom_v)
            .then(
                [self, conn](rdmactor::remote_mr& region, uint64_t tag) {
                  if (tag == 0)
                    return;
                  take_region(self, tag, conn, std::move(region));
                },
                [](caf::error&) {});
      },
      [self](tick_atom) {
        auto& st = self->state;
        st.ticking = false;
        auto now = std::chrono::steady_clock::now();
        // Entries commit in order, so the oldest pending one expires first.
        while (!st.pending.empty() && st.pending.front().deadline <= now) {
          auto& p = st.pending.front();
          p.rp.deliver(rdmactor::make_error(
              rdmactor::errc::request_timeout,
              "entry " + std::to_string(p.index) + " was not committed within "
                  + std::to_string(st.commit_timeout.count())
                  + " ms: it needs the leader and "
                  + std::to_string(st.needed()) + " of the followers, and "
                  + std::to_string(st.followers.size())
                  + " are connected; start followers with --follow (the "
                    "entry stays in the log)"));
          st.pending.pop_front();
        }
        arm_tick(self);
      },
  };
}

} // namespace

int run_leader(caf::actor_system& sys, rdmactor::node& nd,
               const replog_config& cfg, sigset_t stop_signals) {
  auto fail = [](const caf::error& err) {
    std::cerr << "rdmactor-replog: " << rdmactor::render(err) << std::endl;
    return 1;
  };
  if (cfg.cluster == 0 || cfg.cluster > 64)
    return fail(rdmactor::make_error(rdmactor::errc::invalid_argument,
                                     "--cluster must be 1 to 64"));
  if (cfg.capacity == 0 || cfg.capacity > (uint64_t{1} << 20))
    return fail(rdmactor::make_error(rdmactor::errc::invalid_argument,
                                     "--capacity must be 1 to 1048576"));
  // The log: local memory (the source of every WRITE), never lent.
  auto mr = nd.pool()->allocate(cfg.capacity * entry_bytes,
                                rdmactor::memory_pool::arena_align_bytes,
                                rdmactor::transport::access::local_write);
  if (!mr)
    return fail(mr.error());
  auto req_timeout = std::chrono::milliseconds(nd.opts().request_timeout_ms);
  auto leader = sys.spawn(leader_impl, *mr, cfg.capacity, cfg.cluster,
                          std::chrono::milliseconds(cfg.commit_timeout_ms),
                          req_timeout);
  auto stop = [&] {
    nd.close();
    caf::anon_send_exit(leader, caf::exit_reason::user_shutdown);
  };
  if (auto r = nd.publish(service_name, leader); !r) {
    stop();
    return fail(r.error());
  }
  auto port = nd.listen(cfg.lead, caf::actor_cast<caf::actor>(leader));
  if (!port) {
    stop();
    return fail(port.error());
  }
  std::cout << "leader of a " << cfg.cluster << "-node cluster (commits on "
            << cfg.cluster / 2 + 1 << "), log of " << cfg.capacity
            << " entries, serving on port " << *port << " ("
            << nd.device()->kind() << "); SIGINT or SIGTERM stops" << std::endl;
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::string line;
  {
    caf::scoped_actor self{sys};
    self->request(leader, std::chrono::seconds(10), status_atom::value)
        .receive([&](std::string& s) { line = std::move(s); },
                 [&](caf::error& err) { line = rdmactor::render(err); });
  }
  std::cout << "shutting down (" << (sig == SIGINT ? "SIGINT" : "SIGTERM")
            << "): " << line << std::endl;
  stop();
  return 0;
}

} // namespace replog
