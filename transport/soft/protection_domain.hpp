#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <shared_mutex>
#include <unordered_map>

#include <caf/expected.hpp>

#include "transport/soft/registration.hpp"

namespace rdmactor::transport::soft {

/// The protection domain of a soft device: every registration, found by its
/// lkey (local access) or rkey (remote access).  Keys are random, unique
/// within the domain, non-zero, and an lkey never equals an rkey.
///
/// Thread-safe: lookups take the table lock shared, changes exclusively.
class protection_domain {
public:
  protection_domain();

  /// Registers `[addr, addr + len)` with `access` flags.  Fails with
  /// `invalid_argument` for a null address, zero length, unknown flags or
  /// remote_write without local_write (the verbs rule).
  caf::expected<registration_ptr> add(void* addr, size_t len, uint32_t access);

  /// Forgets `reg`: later lookups miss, and it waits for any access in
  /// progress before it marks `reg` invalid.
  void remove(const registration_ptr& reg) noexcept;

  /// Finds the registration of `lkey` that contains `[addr, addr + len)`
  /// and has every flag of `needed`; nullptr otherwise.
  registration_ptr find_local(uint32_t lkey, uint64_t addr, uint64_t len,
                              uint32_t needed) const;

  /// Same as `find_local` for an rkey (remote access by the peer).
  registration_ptr find_remote(uint32_t rkey, uint64_t addr, uint64_t len,
                               uint32_t needed) const;

  /// Returns the number of registrations.
  size_t size() const;

private:
  uint32_t fresh_key_locked();

  mutable std::shared_mutex mtx_;
  std::unordered_map<uint32_t, registration_ptr> by_lkey_;
  std::unordered_map<uint32_t, registration_ptr> by_rkey_;
  std::mt19937 rng_;
};

} // namespace rdmactor::transport::soft
