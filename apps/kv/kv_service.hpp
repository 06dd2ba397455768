#pragma once

// What the parts of rdmactor-kv share: the server actor's typed interface
// (puts, and gets through the server's CPU for comparison), the command
// line, and the entry points of the server, the client and the bench.

#include <cstdint>
#include <string>

#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <rdmactor/rdmactor.hpp>

#include <csignal>

namespace kv {

using put_atom = caf::atom_constant<caf::atom("kv_put")>;
using get_atom = caf::atom_constant<caf::atom("kv_get")>;
using watch_atom = caf::atom_constant<caf::atom("kv_watch")>;
using next_atom = caf::atom_constant<caf::atom("kv_next")>;

/// A subscription to the puts of one key, handed to a client in the reply
/// to `watch_atom` (an actor handle that crosses the connection and
/// becomes a proxy on the client, as with CAF io):
/// - `(next_atom) -> (version, value)`: the next put of the key after the
///   previous answer (the latest one if several came meanwhile); waits for
///   it.
/// - `(put_atom, version, value)`: the service telling it of a put.
/// It ends when the client that asked for it does (its connection goes).
/// Registered as "kv::watcher" with `add_message_type` in both processes
/// (a typed handle inside a message, as CAF io requires too).
using watcher
    = caf::typed_actor<caf::replies_to<next_atom>::with<uint64_t, std::string>,
                       caf::reacts_to<put_atom, uint64_t, std::string>>;

/// The actor the server publishes as "kv".  Strings and integers are CAF
/// builtins; only the watcher handle is registered (kv_config).
/// - `(put_atom, key, value) -> version`: stores the value (the slot's new
///   version, even); `invalid_argument` for a key of 0 or more than
///   key_max_bytes or a value over value_max_bytes, `out_of_memory` when
///   the key's probe window is full of other keys.
/// - `(get_atom, key) -> (found, value)`: the same lookup the clients do
///   with RDMA READ, through the server's CPU (the bench's `--via=actor`).
/// - `(watch_atom, key) -> watcher`: a subscription to the key's puts.
using service = caf::typed_actor<
    caf::replies_to<put_atom, std::string, std::string>::with<uint64_t>,
    caf::replies_to<get_atom, std::string>::with<bool, std::string>,
    caf::replies_to<watch_atom, std::string>::with<watcher>>;

/// The name the server publishes its actor under.
constexpr const char* service_name = "kv";

/// The command line (see main.cpp and `--help`).
class kv_config : public rdmactor::config {
public:
  std::string serve;
  std::string get;
  std::string put;
  std::string watch;
  uint32_t count = 1;
  std::string bench;
  std::string key;
  std::string value;
  std::string value_help;   ///< --value is taken from argv before parse
  bool value_given = false; ///< set by main: --value= may be empty
  std::string fabric;
  uint64_t slots = 4096;
  uint32_t retries = 1000;
  uint32_t clients = 4;
  uint32_t seconds = 5;
  uint32_t keys = 1000;
  uint32_t writers = 0;
  std::string via = "rdma";
  std::string caf_io;

  kv_config();
};

/// Runs the server until SIGINT/SIGTERM (`stop_signals`, blocked in every
/// thread); returns the exit status.
int run_server(caf::actor_system& sys, rdmactor::node& nd, const kv_config& cfg,
               sigset_t stop_signals);

/// `--get`: prints the value of `--key`; exit status 0 found, 1 not found
/// or an error.
int run_get(caf::actor_system& sys, rdmactor::node& nd, const kv_config& cfg);

/// `--put`: stores `--value` under `--key`; exit status 0 or 1.
int run_put(caf::actor_system& sys, rdmactor::node& nd, const kv_config& cfg);

/// `--watch`: prints the next `--count` puts of `--key` as "KEY = VALUE
/// (version V)", waiting at most `--seconds` for each; exit status 0 when
/// all came, 1 otherwise.
int run_watch(caf::actor_system& sys, rdmactor::node& nd, const kv_config& cfg);

/// `--bench`: fills `--keys` keys, then `--clients` connections get random
/// keys for `--seconds` (and `--writers` put meanwhile), checking every
/// value; prints the counts and, last, the latency percentiles and gets/s.
/// Exit status 0 when every get found a well-formed value.
int run_bench(caf::actor_system& sys, rdmactor::node& nd, const kv_config& cfg);

} // namespace kv
