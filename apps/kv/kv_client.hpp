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

/// A key-value store as the bench sees it: gets and puts, blocking, from
/// one thread.
class store {
public:
  virtual ~store() = default;

  /// Looks `key` up; `found` false when it is not in the table.
  virtual caf::expected<get_result> get(const std::string& key) = 0;

  /// Stores `value` under `key`; returns the slot's new version.
  virtual caf::expected<uint64_t> put(const std::string& key,
                                      const std::string& value)
      = 0;
};

/// The sample's client: gets with RDMA READ, puts through the actor.
class client : public store {
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
  caf::expected<get_result> get(const std::string& key) override;

  /// Stores `value` under `key` through the server's actor; returns the
  /// slot's new version.
  caf::expected<uint64_t> put(const std::string& key,
                              const std::string& value) override;

  /// The proxy of the server's "kv" actor.
  const service& actor() const noexcept {
    return svc_;
  }

  const geometry& geo() const noexcept {
    return geo_;
  }

  ~client() override;

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

/// Gets and puts as requests to a "kv" actor: the rdmactor proxy of a
/// client (`--via=actor`: the server's CPU does each lookup) or a CAF io
/// proxy (`--via=caf-io`).
class actor_store : public store {
public:
  /// Uses `svc`; keeps `owner` (the client whose connection carries the
  /// proxy, or null) alive as long as this store.
  actor_store(caf::actor_system& sys, service svc,
              std::chrono::milliseconds timeout, std::unique_ptr<client> owner);

  caf::expected<get_result> get(const std::string& key) override;

  caf::expected<uint64_t> put(const std::string& key,
                              const std::string& value) override;

private:
  std::unique_ptr<client> owner_;
  caf::scoped_actor self_;
  service svc_;
  std::chrono::milliseconds timeout_;
};

} // namespace kv
