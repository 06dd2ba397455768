#pragma once

// A client of rdmactor-kv: one connection, the table the server lent it,
// and a proxy of the server's "kv" actor.  Gets read slots with one-sided
// RDMA READ (the server's CPU does nothing); puts are requests to the
// actor.  Blocking (a scoped actor per client): one per thread.

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/scoped_actor.hpp>

#include <rdmactor/rdmactor.hpp>

#include "kv_service.hpp"
#include "kv_slot.hpp"

namespace kv {

/// The outcome of a get.
struct get_result {
  bool found = false;
  std::string value;
  /// Reads of a slot that raced a write and were repeated.
  uint32_t retries = 0;
  /// RDMA READs posted (one per slot probed, plus the retries).
  uint32_t reads = 0;
};

class client {
public:
  /// Connects to `host_port`, takes the table the server lends (checking
  /// its tag and header) and looks up the "kv" actor.  Errors: those of
  /// connect and lookup, `peer_error` for a peer that is no rdmactor-kv
  /// server or lends a malformed table.
  static caf::expected<std::unique_ptr<client>>
  open(caf::actor_system& sys, rdmactor::node& nd, const std::string& host_port,
       uint32_t max_retries);

  /// Looks `key` up with RDMA READ of its probe window, slot by slot,
  /// repeating a read that raced a write (at most `max_retries` times per
  /// get: then `request_timeout` naming the busy slot).
  caf::expected<get_result> get(const std::string& key);

  /// The same through the server's actor (its CPU does the lookup).
  caf::expected<get_result> get_via_actor(const std::string& key);

  /// Stores `value` under `key` through the server's actor; returns the
  /// slot's new version.
  caf::expected<uint64_t> put(const std::string& key, const std::string& value);

  const geometry& geo() const noexcept {
    return geo_;
  }

  ~client();

private:
  client(caf::actor_system& sys, std::chrono::milliseconds timeout,
         uint32_t max_retries);

  /// Reads slot `i` into buf_.
  caf::error read_slot_raw(uint64_t i);

  caf::scoped_actor self_;
  std::chrono::milliseconds timeout_;
  uint32_t max_retries_;
  rdmactor::connection_actor conn_;
  rdmactor::remote_mr table_;
  rdmactor::local_mr buf_;
  service svc_;
  geometry geo_;
};

} // namespace kv
