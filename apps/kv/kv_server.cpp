// rdmactor-kv's server: the table in registered memory (read-only for
// peers), the "kv" actor that writes it, and the acceptor that lends the
// table to every client that connects.

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pthread.h>

#include <caf/actor_cast.hpp>
#include <caf/actor_ostream.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/io/middleman.hpp>
#include <caf/result.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "kv_service.hpp"
#include "kv_slot.hpp"

namespace kv {

namespace {

/// The table: registered memory, its geometry.
struct table {
  rdmactor::local_mr mr;
  uint64_t slots = 0;
  uint32_t max_probes = 0;

  uint8_t* slot(uint64_t i) const {
    return mr.data() + header_bytes + i * slot_bytes;
  }
};

/// What the "kv" actor did, read by run_server when it stops: one-sided gets
/// never reach the actor, so they are not counted here.
struct service_counts {
  std::atomic<uint64_t> keys{0};       ///< used slots
  std::atomic<uint64_t> puts{0};       ///< puts stored
  std::atomic<uint64_t> actor_gets{0}; ///< gets answered by the actor
};

/// Subscriptions open at once (a client's end ends its own).
constexpr size_t max_watchers = 4096;

struct service_state {
  table tab;
  std::shared_ptr<service_counts> counts;
  /// The subscriptions, by key (each leaves when it ends).
  std::multimap<std::string, watcher> watchers;
  static inline const char* name = "kv.service";
};

struct watcher_state {
  /// The put not yet taken by a `next` (the latest).
  std::optional<std::pair<uint64_t, std::string>> latest;
  /// A `next` waiting for the put.
  std::optional<caf::typed_response_promise<uint64_t, std::string>> waiting;
  static inline const char* name = "kv.watcher";
};

/// One client's subscription to one key; ends with `client` (the proxy of
/// the actor that asked: it ends when the client's connection goes).
watcher::behavior_type
watcher_impl(watcher::stateful_pointer<watcher_state> self,
             caf::actor_addr client) {
  if (auto c = caf::actor_cast<caf::strong_actor_ptr>(client)) {
    self->monitor(c);
    self->set_down_handler([self](caf::down_msg&) { self->quit(); });
  } else {
    self->quit();
  }
  return {
      [self](next_atom) -> caf::result<uint64_t, std::string> {
        auto& st = self->state;
        if (st.latest) {
          auto [version, value] = std::move(*st.latest);
          st.latest.reset();
          return {version, std::move(value)};
        }
        if (st.waiting) // one `next` at a time
          return rdmactor::make_error(rdmactor::errc::invalid_argument,
                                      "a next is already waiting on this "
                                      "watcher: wait for its answer");
        st.waiting = self->make_response_promise<uint64_t, std::string>();
        return *st.waiting;
      },
      [self](put_atom, uint64_t version, std::string& value) {
        auto& st = self->state;
        if (st.waiting) {
          st.waiting->deliver(version, std::move(value));
          st.waiting.reset();
        } else {
          st.latest.emplace(version, std::move(value));
        }
      },
  };
}

/// Finds the slot of `key`, or the first empty one in its probe window;
/// nullptr when every slot of the window holds another key.
uint8_t* find_slot(const table& tab, const std::string& key) {
  auto home = home_slot(key, tab.slots);
  for (uint32_t i = 0; i < tab.max_probes; ++i) {
    auto p = tab.slot((home + i) % tab.slots);
    auto k = key_of(p);
    if (k.empty() || k == key)
      return p;
  }
  return nullptr;
}

caf::error check_key(const std::string& key) {
  if (key.empty() || key.size() > key_max_bytes)
    return rdmactor::make_error(
        rdmactor::errc::invalid_argument,
        "keys have 1 to " + std::to_string(key_max_bytes)
            + " bytes; this one has " + std::to_string(key.size()));
  return {};
}

/// The "kv" actor: the only writer of the table (puts are serialized in its
/// mailbox, so no lock is needed and a client that dies mid-put leaves
/// nothing half-done: the actor finishes or never starts the write).
service::behavior_type
service_impl(service::stateful_pointer<service_state> self, table tab,
             std::shared_ptr<service_counts> counts) {
  self->state.tab = std::move(tab);
  self->state.counts = std::move(counts);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& ws = self->state.watchers;
    for (auto i = ws.begin(); i != ws.end(); ++i)
      if (i->second.address() == dm.source) {
        ws.erase(i);
        return;
      }
  });
  return {
      [self](put_atom, const std::string& key,
             const std::string& value) -> caf::result<uint64_t> {
        if (auto err = check_key(key))
          return err;
        if (value.size() > value_max_bytes)
          return rdmactor::make_error(
              rdmactor::errc::invalid_argument,
              "values have at most " + std::to_string(value_max_bytes)
                  + " bytes; this one has " + std::to_string(value.size()));
        auto& st = self->state;
        auto p = find_slot(st.tab, key);
        if (p == nullptr)
          return rdmactor::make_error(
              rdmactor::errc::out_of_memory,
              "no free slot within " + std::to_string(st.tab.max_probes)
                  + " probes of this key's home slot; start the server with "
                    "more --slots");
        if (key_of(p).empty())
          ++st.counts->keys;
        ++st.counts->puts;
        auto version = write_slot(p, key, value);
        auto range = st.watchers.equal_range(key);
        for (auto i = range.first; i != range.second; ++i)
          self->send(i->second, put_atom::value, version, value);
        return version;
      },
      [self](watch_atom, const std::string& key) -> caf::result<watcher> {
        if (auto err = check_key(key))
          return err;
        if (self->state.watchers.size() >= max_watchers)
          return rdmactor::make_error(
              rdmactor::errc::quota_exceeded,
              std::to_string(max_watchers)
                  + " watchers are open on this server (each ends with its "
                    "client): try again later");
        auto w
            = self->spawn(watcher_impl, self->current_sender()
                                            ? self->current_sender()->address()
                                            : caf::actor_addr{});
        self->monitor(w);
        self->state.watchers.emplace(key, w);
        return w;
      },
      [self](get_atom,
             const std::string& key) -> caf::result<bool, std::string> {
        if (auto err = check_key(key))
          return err;
        ++self->state.counts->actor_gets;
        auto p = find_slot(self->state.tab, key);
        if (p == nullptr || key_of(p).empty())
          return {false, std::string{}};
        return {true, value_of(p)};
      },
  };
}

struct acceptor_state {
  rdmactor::local_mr table_mr;
  /// A connection lives as long as a handle to it: keep each until it ends.
  std::vector<rdmactor::connection_actor> connections;
  static inline const char* name = "kv.acceptor";
};

/// Keeps each client's connection and lends it the table (read-only),
/// tagged with table_magic: the client takes it with
/// receive_tagged_remote_mr.
caf::behavior acceptor_impl(caf::stateful_actor<acceptor_state>* self,
                            rdmactor::local_mr table_mr,
                            std::chrono::milliseconds timeout) {
  self->state.table_mr = std::move(table_mr);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& cs = self->state.connections;
    for (auto i = cs.begin(); i != cs.end(); ++i) {
      if (i->address() == dm.source) {
        cs.erase(i);
        caf::aout(self) << "client left (" << rdmactor::render(dm.reason)
                        << "), " << cs.size() << " connected" << std::endl;
        return;
      }
    }
  });
  return {
      [self, timeout](rdmactor::accepted_atom,
                      rdmactor::connection_actor& conn) {
        self->monitor(conn);
        self->state.connections.push_back(conn);
        caf::aout(self) << "client connected, "
                        << self->state.connections.size() << " connected"
                        << std::endl;
        self->request(conn, timeout, rdmactor::send_mr_atom_v,
                      self->state.table_mr, table_magic)
            .then([](rdmactor::mr_token&) {},
                  [self](caf::error& err) {
                    caf::aout(self) << "lending the table to a client failed: "
                                    << rdmactor::render(err) << std::endl;
                  });
      },
  };
}

} // namespace

int run_server(caf::actor_system& sys, rdmactor::node& nd, const kv_config& cfg,
               sigset_t stop_signals) {
  auto fail = [](const caf::error& err) {
    std::cerr << "rdmactor-kv: " << rdmactor::render(err) << std::endl;
    return 1;
  };
  if (cfg.slots == 0 || cfg.slots > (uint64_t{1} << 24))
    return fail(rdmactor::make_error(rdmactor::errc::invalid_argument,
                                     "--slots must be 1 to 16777216"));
  // The table: registered memory that peers may only read, in a
  // registration of its own, so the rkey the clients get opens the table
  // and nothing else (an rkey opens its whole registration; a shared arena
  // may hold other memory).
  table tab;
  tab.slots = cfg.slots;
  tab.max_probes = static_cast<uint32_t>(
      std::min<uint64_t>(default_max_probes, cfg.slots));
  auto bytes = header_bytes + cfg.slots * slot_bytes;
  auto mr = nd.pool()->allocate_dedicated(
      bytes, rdmactor::transport::access::remote_read);
  if (!mr)
    return fail(mr.error());
  tab.mr = *mr;
  write_header(tab.mr.data(), tab.slots, tab.max_probes);
  auto counts = std::make_shared<service_counts>();
  auto svc = sys.spawn(service_impl, tab, counts);
  if (auto r = nd.publish(service_name, svc); !r) {
    caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
    return fail(r.error());
  }
  auto timeout = std::chrono::milliseconds(nd.opts().request_timeout_ms);
  auto acceptor = sys.spawn(acceptor_impl, tab.mr, timeout);
  auto port = nd.listen(cfg.serve, acceptor);
  if (!port) {
    caf::anon_send_exit(acceptor, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
    return fail(port.error());
  }
  if (!cfg.caf_io.empty()) {
    // For the bench's comparison (--via=caf-io): the same actor over CAF io.
    auto colon = cfg.caf_io.rfind(':');
    if (colon == std::string::npos) {
      std::cerr << "rdmactor-kv: --caf-io=" << cfg.caf_io << " is not HOST:PORT"
                << std::endl;
      nd.close();
      caf::anon_send_exit(acceptor, caf::exit_reason::user_shutdown);
      caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
      return 1;
    }
    auto want = static_cast<uint16_t>(
        std::strtoul(cfg.caf_io.c_str() + colon + 1, nullptr, 10));
    auto host = cfg.caf_io.substr(0, colon);
    auto p = sys.middleman().publish(svc, want, host.c_str(), true);
    if (!p) {
      std::cerr << "rdmactor-kv: CAF io publish on " << cfg.caf_io << ": "
                << sys.render(p.error()) << std::endl;
      nd.close();
      caf::anon_send_exit(acceptor, caf::exit_reason::user_shutdown);
      caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
      return 1;
    }
    std::cout << "kv actor also published over CAF io on port " << *p
              << std::endl;
  }
  std::cout << "kv table of " << tab.slots << " slots (" << bytes
            << " bytes, read-only for peers), serving on port " << *port << " ("
            << nd.device()->kind() << "); SIGINT or SIGTERM stops" << std::endl;
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::cout << "shutting down (" << (sig == SIGINT ? "SIGINT" : "SIGTERM")
            << ")" << std::endl;
  nd.close();
  caf::anon_send_exit(acceptor, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(svc, caf::exit_reason::user_shutdown);
  std::cout << "the kv actor stored " << counts->puts << " puts ("
            << counts->keys << " keys) and answered " << counts->actor_gets
            << " gets; one-sided gets never reached it" << std::endl;
  return 0;
}

} // namespace kv
