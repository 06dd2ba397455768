#pragma once

// What the parts of rdmactor-replog share: the typed interfaces of the
// leader's published "log" actor and of a follower's actor, the command
// line, and the entry points of the leader, the follower and the clients.

#include <csignal>
#include <cstdint>
#include <string>

#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <rdmactor/rdmactor.hpp>

namespace replog {

using append_atom = caf::atom_constant<caf::atom("rl_append")>;
using join_atom = caf::atom_constant<caf::atom("rl_join")>;
using status_atom = caf::atom_constant<caf::atom("rl_status")>;
using replicate_atom = caf::atom_constant<caf::atom("rl_repl")>;

/// The actor the leader publishes as "log".  Strings and integers are CAF
/// builtins: nothing to register with `add_message_type`.
/// - `(append_atom, value) -> index`: appends an entry and answers its
///   index once a majority of the cluster holds it (the leader and
///   cluster/2 followers); `invalid_argument` for an empty value or one
///   over value_max_bytes, `out_of_memory` when the log is full,
///   `request_timeout` when no majority confirmed it within
///   --commit-timeout-ms (the entry stays in the log and is committed
///   when enough followers are back, as in Raft).
/// - `(join_atom, follower_id, epoch) -> (capacity, last)`: sent by a
///   follower's actor (the leader reaches it through its proxy); the
///   follower then lends the leader memory for `capacity` entries on the
///   same connection, tagged with `epoch`, and the leader writes every
///   entry into it with RDMA WRITE, then tells the follower actor.
/// - `(status_atom) -> line`: "last=L commit=C digest=D followers=N
///   [ID:MATCH...]" (D: the digest of entries 1..L).
using log_service = caf::typed_actor<
    caf::replies_to<append_atom, std::string>::with<uint64_t>,
    caf::replies_to<join_atom, uint32_t, uint64_t>::with<uint64_t, uint64_t>,
    caf::replies_to<status_atom>::with<std::string>>;

/// A follower's actor, reached by the leader through the proxy of the
/// join's sender:
/// - `(replicate_atom, first, last, commit) -> applied`: entries
///   first..last are in the follower's memory (the leader's WRITE
///   completed before it sent this); the follower checks each and answers
///   how many entries it holds in a row from 1; `invalid_argument` when an
///   entry fails its check or the range leaves a gap.
using follower_service
    = caf::typed_actor<caf::replies_to<replicate_atom, uint64_t, uint64_t,
                                       uint64_t>::with<uint64_t>>;

/// The name the leader publishes its actor under.
constexpr const char* service_name = "log";

/// The command line (see main.cpp and `--help`).
class replog_config : public rdmactor::config {
public:
  std::string lead;
  std::string follow;
  std::string append;
  std::string status;
  std::string bench;
  std::string value;
  std::string fabric;
  uint32_t id = 0;
  uint32_t cluster = 3;
  uint64_t capacity = 4096;
  uint32_t commit_timeout_ms = 5000;
  uint32_t count = 1000;
  uint32_t size = 100;
  uint32_t window = 16;

  replog_config();
};

/// `--lead`: serves the log until SIGINT/SIGTERM (`stop_signals`, blocked
/// in every thread); returns the exit status.
int run_leader(caf::actor_system& sys, rdmactor::node& nd,
               const replog_config& cfg, sigset_t stop_signals);

/// `--follow`: joins the leader and keeps a copy of its log until
/// SIGINT/SIGTERM (exit status 0, after printing its digest) or until the
/// leader goes (exit status 1).
int run_follower(caf::actor_system& sys, rdmactor::node& nd,
                 const replog_config& cfg, sigset_t stop_signals);

/// `--append`, `--status` and `--bench`: the clients; exit status 0 or 1.
int run_client(caf::actor_system& sys, rdmactor::node& nd,
               const replog_config& cfg);

} // namespace replog
