#pragma once

// A deterministic harness for actor-level tests: two agents (a "client"
// and a "server", each with its own fake device, memory pool and
// allocator) whose fake links are wired to each other, on one actor system
// run by CAF's test coordinator, or on one such system per side (two
// nodes' worth, for remote actors).  No sockets and no threads: the test
// drives everything with `settle()` and the simulated clock.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "common/logging.hpp"
#include "rdmactor/config.hpp"
#include "rdmactor/connection.hpp"
#include "rdmactor/detail/actor_directory.hpp"
#include "rdmactor/detail/agent.hpp"
#include "rdmactor/detail/transport_actor.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/memory_pool.hpp"
#include "test/support/fake_fabric.hpp"
#include "test/support/harness_world.hpp"
#include "test/support/wired_link.hpp"

namespace rdmactor::test {

/// Options of a harnessed connection: those of the soft-fabric suites
/// without the keepalive (its timer runs on a thread of its own).
inline options harness_options() {
  options o;
  o.fabric = "soft";
  o.max_message_len_bytes = 4096;
  o.recv_depth = 16;
  o.request_timeout_ms = 3000;
  o.keepalive_ms = 0;
  o.arena_size_bytes = 1 << 20;
  o.max_alloc_bytes = 64 << 20;
  o.log_level = "warn";
  return o;
}

/// The answer to a request made through `agent_harness::ask`: filled by
/// the helper actor that made it, once the actors ran far enough.
template <class... Ts>
struct pending_reply {
  /// Whether the answer (a value or an error) arrived.
  bool done = false;
  caf::error error;
  std::optional<std::tuple<Ts...>> values;
};

/// How a connection ended, recorded by `agent_harness::watch`.
struct down_record {
  bool down = false;
  caf::error reason;
};

/// The chunks a data subscriber got, in arrival order
/// (`agent_harness::collector`).
struct chunk_log {
  data_subscriber hdl;
  std::shared_ptr<std::vector<local_mr>> chunks
      = std::make_shared<std::vector<local_mr>>();
};

/// Two nodes' worth of agents on CAF's test coordinator: a client and a
/// server side, each with its own fake device, pool, allocator and
/// node-wide directory of published actors, and any number of connections
/// between them (`connect`), each a pair of agents over wired fake links.
/// Both sides share one actor system, or each has its own (`systems`), as
/// two nodes do: its own registered message types, node id and proxies;
/// `add_side` adds more nodes, each on a system of its own.
/// `settle()` runs the actors of every system until nothing moves,
/// carrying frames both ways and waking the agents when completions wait;
/// `advance(ms)` moves the simulated clock (every system's, together) and
/// fires the timers due.  The harness holds the connections only through
/// `client_conn` and `server_conn` (what `connect` returned last):
/// dropping those drops the connection.  A connection may have a script
/// instead of the client's agent (`connect_scripted`, scripted_peer.hpp).
class agent_harness {
public:
  /// One actor system on CAF's test coordinator (harness_world.hpp).
  using world = harness_world;

  /// The pool and allocator of one side (a node's share of the state).
  struct side {
    /// What the agents of the other sides call this one (their peer).
    std::string name;
    std::shared_ptr<fuzz::fake_device> dev
        = std::make_shared<fuzz::fake_device>();
    memory_pool_ptr pool;
    allocator_actor allocator;
    options opts;
    /// What the side's node publishes for every connection (the agents
    /// get it as a node's connections do).
    actor_directory_ptr published = std::make_shared<actor_directory>();
    /// The actor system the side's actors run in.
    world* home = nullptr;

    /// Bytes the side's pool has handed out and not got back.
    uint64_t bytes_in_use() const {
      return pool->stats().bytes_in_use;
    }

    caf::actor_system& sys() const noexcept {
      return home->sys();
    }
  };

  /// The configs of the actor systems of a harness whose sides each have
  /// their own (their message types, for instance); the harness sets the
  /// scheduler policy.
  struct systems {
    std::unique_ptr<rdmactor::config> client;
    std::unique_ptr<rdmactor::config> server;
  };

  /// Tag of the constructor that opens no connection.
  struct unconnected_t {};
  static constexpr unconnected_t unconnected{};

  explicit agent_harness(options client_opts = harness_options())
      : agent_harness(client_opts, client_opts) {}

  agent_harness(options client_opts, options server_opts)
      : agent_harness(std::move(client_opts), std::move(server_opts),
                      unconnected) {
    std::tie(client_conn, server_conn) = connect();
  }

  /// Builds both sides on one actor system and opens no connection
  /// (`connect`, `connect_scripted`).
  agent_harness(options client_opts, options server_opts, unconnected_t)
      : agent_harness(std::move(client_opts), std::move(server_opts),
                      systems{std::make_unique<rdmactor::config>(), nullptr},
                      unconnected) {}

  /// Builds each side on an actor system of its own, of the config in
  /// `own`, and opens one connection (settled).
  agent_harness(options client_opts, options server_opts, systems own)
      : agent_harness(std::move(client_opts), std::move(server_opts),
                      std::move(own), unconnected) {
    std::tie(client_conn, server_conn) = connect();
  }

  /// Builds both sides and opens no connection; the server shares the
  /// client's actor system when `own.server` is null.
  agent_harness(options client_opts, options server_opts, systems own,
                unconnected_t) {
    worlds_.push_back(std::make_unique<world>(std::move(own.client)));
    if (own.server)
      worlds_.push_back(std::make_unique<world>(std::move(own.server)));
    client.name = "client";
    server.name = "server";
    client.home = worlds_.front().get();
    server.home = worlds_.back().get();
    // Keys of the two devices never collide: a token of one side never
    // names a registration of the other by accident.
    server.dev->registry->rewind(0x100000);
    // As a node does: the client's options set the process's log level.
    set_log_level(client_opts.log_level);
    make_side(client, std::move(client_opts));
    make_side(server, std::move(server_opts));
  }

  /// Closes every connection, fires the timers left and checks that each
  /// side's pool got every byte back (the test's own handles, declared
  /// after the harness, are gone by then) and that no work request used
  /// unregistered memory.
  ~agent_harness() {
    client_conn = connection_actor{};
    server_conn = connection_actor{};
    for (auto& w : watchers_)
      caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
    watchers_.clear();
    for (auto& w : wires_)
      for (auto& e : w.agents)
        if (auto hdl = caf::actor_cast<caf::actor>(e))
          caf::anon_send_exit(hdl, caf::exit_reason::user_shutdown);
    for (auto* s : all_sides())
      s->published->clear();
    bool idle = run_until_idle();
    for (int i = 0; idle && i < max_rounds && trigger_next_timeout(); ++i)
      idle = run_until_idle();
    BOOST_CHECK_MESSAGE(idle, "the actors never became idle at the end");
    for (auto* s : all_sides())
      BOOST_CHECK_MESSAGE(s->bytes_in_use() == 0u,
                          "the " << s->name << "'s pool holds "
                                 << s->bytes_in_use() << " bytes");
    // The transports never posted memory that was not registered as
    // needed (a NIC would have failed the work request).
    for (auto& w : wires_)
      for (auto& e : w.ends)
        BOOST_CHECK_EQUAL(e->link->protection_errors, 0u);
    for (auto* s : all_sides())
      caf::anon_send_exit(s->allocator, caf::exit_reason::user_shutdown);
    run_until_idle();
    for (auto& w : worlds_)
      w->sys().await_actors_before_shutdown(false);
  }

  agent_harness(const agent_harness&) = delete;
  agent_harness& operator=(const agent_harness&) = delete;

  // -- connections -----------------------------------------------------------

  /// Opens one more connection between the client and the server;
  /// returns its (client, server) ends, settled (both Hellos exchanged).
  std::pair<connection_actor, connection_actor> connect() {
    return connect(client, server);
  }

  /// Opens a connection between `a` and `b` (`add_side` makes more than
  /// two); returns its (a, b) ends, settled.
  std::pair<connection_actor, connection_actor> connect(side& a, side& b) {
    connection_actor conns[2];
    open_wire(a, b, false, conns);
    settle();
    return {conns[0], conns[1]};
  }

  /// Adds one more side, `name`, on an actor system of its own of `cfg`
  /// (a third node, say); connect it with `connect(side&, side&)`.
  side& add_side(std::string name, options opts,
                 std::unique_ptr<rdmactor::config> cfg) {
    worlds_.push_back(std::make_unique<world>(std::move(cfg)));
    auto& s = more_sides_.emplace_back();
    s.name = std::move(name);
    s.home = worlds_.back().get();
    // Keys of its own, far from the client's and the server's.
    s.dev->registry->rewind(
        static_cast<uint32_t>(0x100000 * (1 + more_sides_.size())));
    make_side(s, std::move(opts));
    return s;
  }

  /// The ends of a connection whose client end is a script
  /// (test/support/scripted_peer.hpp): what the script puts in
  /// `client->out` reaches the server's agent, and what the agent posts
  /// stays in `server->out` for the script to take.  `on_round` runs in
  /// every round of `settle` and says whether it moved anything.
  struct scripted_wire {
    connection_actor agent;
    std::shared_ptr<wire_end> client;
    std::shared_ptr<wire_end> server;
  };

  /// Opens a connection whose client end is a script and whose server end
  /// an agent; settled (the agent's Hello waits in `server->out`).
  scripted_wire connect_scripted(std::function<bool()> on_round) {
    connection_actor conns[2];
    auto& w = open_wire(client, server, true, conns);
    w.on_round = std::move(on_round);
    settle();
    return {conns[1], w.ends[0], w.ends[1]};
  }

  /// Stops running the `on_round` of every scripted connection (its
  /// script is going away).
  void detach_scripts() {
    for (auto& w : wires_)
      w.on_round = nullptr;
  }

  /// Makes the link of the last connection fail on both ends, as when the
  /// peer's process dies: every posted receive completes flushed.
  void break_link() {
    for (auto& e : wires_.back().ends)
      e->link->close();
    settle();
  }

  // -- running ---------------------------------------------------------------

  /// Runs every actor until nothing moves: carries what each link posted
  /// to its peer (as far as the peer has receives posted), wakes an end's
  /// driver (its agent, then its transport) while its CQ holds
  /// completions, and fails a link whose peer's link failed once the
  /// peer's frames are delivered.
  void settle() {
    if (!run_until_idle())
      BOOST_FAIL("the actors never became idle");
  }

  /// Moves the simulated clock `ms` forward, firing every timer due on
  /// the way (in deadline order across the actor systems, settling after
  /// each).
  void advance(uint64_t ms) {
    auto target = now() + std::chrono::milliseconds(ms);
    for (int i = 0; i < max_rounds; ++i) {
      auto* next = next_timeout();
      if (next == nullptr || next->clock().schedule().begin()->first > target)
        break;
      trigger_next_timeout();
      settle();
    }
    set_clocks(target);
    settle();
  }

  /// The simulated clock (every actor system's reads the same).
  caf::actor_clock::time_point now() {
    return client.home->clock().now();
  }

  /// The client's actor system (the server's too unless each side has its
  /// own: `server.sys()`).
  caf::actor_system& sys() {
    return client.sys();
  }

  // -- talking to connections ------------------------------------------------

  /// Sends `xs...` to `hdl` as a request from a fresh helper actor in
  /// `hdl`'s actor system; the reply fills the returned record once the
  /// actors ran (`settle`).  Requests from one test reach an actor in the
  /// order they were made.
  template <class... Rs, class Handle, class... Xs>
  std::shared_ptr<pending_reply<Rs...>> ask(const Handle& hdl, Xs... xs) {
    auto reply = std::make_shared<pending_reply<Rs...>>();
    // The helper gets its state as spawn arguments (CAF 0.17 dereferences
    // a null argument tuple for an argument-less function-based actor).
    home_of(hdl).spawn(
        [](caf::event_based_actor* self, caf::actor dest,
           std::shared_ptr<pending_reply<Rs...>> out, Xs... args) {
          self->request(dest, std::chrono::seconds(3600), std::move(args)...)
              .then(
                  [out](Rs&... rs) {
                    out->values.emplace(std::move(rs)...);
                    out->done = true;
                  },
                  [out](caf::error& err) {
                    out->error = std::move(err);
                    out->done = true;
                  });
        },
        caf::actor_cast<caf::actor>(hdl), reply, std::move(xs)...);
    run_jobs();
    return reply;
  }

  /// What `call<Rs...>` returns: the value, or a tuple of several.
  template <class... Rs>
  using call_result
      = std::conditional_t<sizeof...(Rs) == 1,
                           std::tuple_element_t<0, std::tuple<Rs...>>,
                           std::tuple<Rs...>>;

  /// Makes a request (`ask`), settles and returns its answer; an error
  /// when it was not answered by then (`caf::sec::request_timeout`).
  template <class... Rs, class Handle, class... Xs>
  caf::expected<call_result<Rs...>> call(const Handle& hdl, Xs... xs) {
    auto reply = ask<Rs...>(hdl, std::move(xs)...);
    settle();
    return take(*reply);
  }

  /// The answer in `reply`, or `caf::sec::request_timeout` when none came.
  template <class... Rs>
  static caf::expected<call_result<Rs...>> take(pending_reply<Rs...>& reply) {
    if (!reply.done)
      return caf::make_error(caf::sec::request_timeout);
    if (!reply.values)
      return std::move(reply.error);
    if constexpr (sizeof...(Rs) == 1)
      return std::move(std::get<0>(*reply.values));
    else
      return std::move(*reply.values);
  }

  /// Registered memory with every access right from `conn`
  /// (`alloc_local_mr`); fails the test when there is none.
  local_mr alloc(const connection_actor& conn, uint64_t size,
                 uint64_t align = 64) {
    auto mr = call<local_mr>(conn, alloc_local_mr_atom::value, size, align);
    BOOST_REQUIRE_MESSAGE(mr, render(mr));
    return std::move(*mr);
  }

  /// The connection's statistics; fails the test when it does not answer.
  agent_stats stats(const connection_actor& conn) {
    auto s = call<agent_stats>(conn, stats_atom::value);
    BOOST_REQUIRE_MESSAGE(s, render(s));
    return *s;
  }

  /// Monitors `hdl` from a helper actor in its actor system; the record
  /// says when and why it went.
  template <class Handle>
  std::shared_ptr<down_record> watch(const Handle& hdl) {
    auto rec = std::make_shared<down_record>();
    // Held here: an actor nobody holds ends at once.
    watchers_.emplace_back(home_of(hdl).spawn(
        [](caf::event_based_actor* self, caf::actor_addr target,
           std::shared_ptr<down_record> out) -> caf::behavior {
          self->set_down_handler([self, out](caf::down_msg& msg) {
            out->down = true;
            out->reason = msg.reason;
            self->quit();
          });
          self->monitor(target);
          return {[](const std::string&) {}};
        },
        caf::actor_cast<caf::actor_addr>(hdl), rec));
    run_jobs();
    return rec;
  }

  /// A data subscriber (in the client's actor system) that keeps every
  /// chunk it gets.
  chunk_log collector() {
    chunk_log log;
    log.hdl = sys().spawn(
        [](data_subscriber::pointer, std::shared_ptr<std::vector<local_mr>> out)
            -> data_subscriber::behavior_type {
          return {[out](data_atom, local_mr& chunk) {
            out->push_back(std::move(chunk));
          }};
        },
        log.chunks);
    run_jobs();
    return log;
  }

  side client;
  side server;
  /// The ends of the connection `connect` opened last.
  connection_actor client_conn;
  connection_actor server_conn;

private:
  /// Bound of the loops that run the actors to quiescence.
  static constexpr int max_rounds = 100000;

  /// One connection: the wire's two ends and (weakly) the actors on them.
  struct wire {
    std::shared_ptr<wire_end> ends[2];
    caf::weak_actor_ptr agents[2];
    caf::weak_actor_ptr transports[2];
    /// Whether end 0 is a script (`connect_scripted`).
    bool scripted = false;
    /// What the script does in every round of `settle`.
    std::function<bool()> on_round;
  };

  /// Opens a wire between `a` and `b` and spawns its agents (b's only,
  /// when `scripted`), whose handles it puts in `conns`.
  wire& open_wire(side& a_side, side& b_side, bool scripted,
                  connection_actor (&conns)[2]) {
    auto& w = wires_.emplace_back();
    w.scripted = scripted;
    // What the two nodes would agree on: receive buffers of the eager size
    // (larger payloads go by rendezvous), the smaller of both offers.
    auto offer = [](const options& o) {
      return transport::conn_params{
          std::min(o.max_message_len_bytes, o.eager_message_len_bytes),
          o.recv_depth};
    };
    auto a = offer(a_side.opts);
    auto b = offer(b_side.opts);
    transport::conn_params params{
        std::min(a.max_message_len_bytes, b.max_message_len_bytes),
        std::min(a.recv_depth, b.recv_depth)};
    side* sides[] = {&a_side, &b_side};
    for (int i = 0; i < 2; ++i) {
      w.ends[i] = std::make_shared<wire_end>();
      w.ends[i]->registry = sides[i]->dev->registry;
      w.ends[i]->link
          = std::make_shared<fuzz::fake_link>(sides[i]->dev->registry, params);
    }
    w.ends[0]->peer = w.ends[1].get();
    w.ends[1]->peer = w.ends[0].get();
    for (int i = scripted ? 1 : 0; i < 2; ++i) {
      auto& s = *sides[i];
      // Events, not polling: the test coordinator runs until no message is
      // left, and a polling transport always has its next poll queued.
      auto& peer = sides[1 - i]->name;
      auto lent = transport::spawn_lending_transport(
          s.sys(), s.dev, std::make_unique<wired_queue_pair>(w.ends[i], peer),
          transport::polling{transport::completion_mode::event, 0});
      w.transports[i] = caf::actor_cast<caf::weak_actor_ptr>(lent.transport);
      auto agent
          = spawn_agent(s.sys(), std::move(lent),
                        transport::link_params{params.max_message_len_bytes,
                                               params.recv_depth, peer},
                        s.pool, s.allocator, s.opts, s.published);
      w.agents[i] = caf::actor_cast<caf::weak_actor_ptr>(agent);
      conns[i] = caf::actor_cast<connection_actor>(agent);
    }
    return w;
  }

  /// The client, the server and the sides `add_side` added.
  std::vector<side*> all_sides() {
    std::vector<side*> out{&client, &server};
    for (auto& s : more_sides_)
      out.push_back(&s);
    return out;
  }

  /// Runs the jobs of every actor system (those they make one another
  /// included) until none has any.
  void run_jobs() {
    for (bool any = true; any;) {
      any = false;
      for (auto& w : worlds_)
        any = w->sched().run() > 0 || any;
    }
  }

  /// Whether an actor system has a job to run.
  bool any_job() {
    for (auto& w : worlds_)
      if (w->sched().has_job())
        return true;
    return false;
  }

  /// The actor system `hdl` lives in (the client's for an invalid one).
  template <class Handle>
  caf::actor_system& home_of(const Handle& hdl) {
    if (auto ptr = caf::actor_cast<caf::strong_actor_ptr>(hdl))
      for (auto& w : worlds_)
        if (ptr->home_system == &w->sys())
          return w->sys();
    return sys();
  }

  /// The actor system whose next timeout is the earliest; null when none
  /// has one.
  world* next_timeout() {
    world* next = nullptr;
    for (auto& w : worlds_) {
      auto& pending = w->clock().schedule();
      if (!pending.empty()
          && (next == nullptr
              || pending.begin()->first
                     < next->clock().schedule().begin()->first))
        next = w.get();
    }
    return next;
  }

  /// Fires the earliest timeout of all actor systems and moves the other
  /// clocks to its time; returns false when none has one.
  bool trigger_next_timeout() {
    auto* next = next_timeout();
    if (next == nullptr)
      return false;
    next->sched().trigger_timeout();
    set_clocks(next->clock().current_time);
    return true;
  }

  /// Moves every clock that is behind `t` to `t`.
  void set_clocks(caf::actor_clock::time_point t) {
    for (auto& w : worlds_)
      if (w->clock().current_time < t)
        w->clock().current_time = t;
  }

  /// What `settle` does; returns false when the actors still moved after
  /// `max_rounds` rounds.
  bool run_until_idle() {
    for (int round = 0; round < max_rounds; ++round) {
      run_jobs();
      bool moved = false;
      for (auto& w : wires_) {
        if (w.scripted) {
          w.ends[1]->take_sent(); // the script takes them
          if (w.on_round)
            moved = w.on_round() || moved;
          moved = carry(*w.ends[0]) || moved;
        } else {
          for (auto& e : w.ends)
            moved = carry(*e) || moved;
        }
      }
      bool kicked = false;
      for (auto& w : wires_)
        for (int i = 0; i < 2; ++i)
          kicked = kick(w, i) || kicked;
      if (moved || kicked || any_job())
        continue;
      bool failed = false;
      for (auto& w : wires_)
        for (auto& e : w.ends)
          if (e->link->in_error() && !e->peer->link->in_error()) {
            e->peer->link->close();
            e->peer->fresh = true;
            failed = true;
          }
      if (!failed)
        return true;
    }
    return false;
  }

  void make_side(side& s, options opts) {
    s.opts = std::move(opts);
    s.pool = std::make_shared<memory_pool>(s.dev, s.opts.arena_size_bytes,
                                           s.opts.max_alloc_bytes);
    s.allocator = spawn_allocator(s.sys(), s.pool);
    run_jobs();
  }

  /// Delivers what `e` posted to its peer while the peer has receives;
  /// drops it when the peer's link failed.  Returns whether anything
  /// moved.
  bool carry(wire_end& e) {
    e.take_sent();
    auto& dst = *e.peer;
    bool moved = false;
    while (!e.out.empty()) {
      auto& f = e.out.front();
      if (!dst.link->in_error()) {
        bool ok = f.write_imm ? dst.link->deliver_write_imm(*f.imm, f.write_len)
                              : dst.link->deliver(f.bytes.data(),
                                                  f.bytes.size(), f.imm);
        if (!ok)
          break; // no receive posted yet
        dst.fresh = true;
      }
      e.out.pop_front();
      moved = true;
    }
    return moved;
  }

  /// Wakes the driver of end `i` of `w` when its CQ holds completions it
  /// has not been woken for.  Returns whether it did.
  bool kick(wire& w, int i) {
    auto& e = *w.ends[i];
    if (!e.link->has_completions())
      return false;
    if (!e.fresh && e.link->polls == e.kicked_at)
      return false;
    e.fresh = false;
    e.kicked_at = e.link->polls;
    bool any = false;
    if (auto agent = caf::actor_cast<caf::actor>(w.agents[i])) {
      caf::anon_send(agent, transport::cq_event_atom::value);
      any = true;
    }
    if (auto tr = caf::actor_cast<caf::actor>(w.transports[i])) {
      caf::anon_send(tr, transport::cq_event_atom::value);
      any = true;
    }
    return any;
  }

  /// The actor systems: one, or one per side (the client's first).
  std::vector<std::unique_ptr<world>> worlds_;
  /// The sides beyond the client and the server (`add_side`).
  std::deque<side> more_sides_;
  std::deque<wire> wires_;
  /// The helper actors of `watch`.
  std::vector<caf::actor> watchers_;
};

} // namespace rdmactor::test
