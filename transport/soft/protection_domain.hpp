#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <shared_mutex>
#include <vector>

#include <caf/expected.hpp>

#include "transport/soft/registration.hpp"

namespace rdmactor::transport::soft {

/// The protection domain of a soft device: every registration, found by its
/// lkey (local access) or rkey (remote access).  Keys are random, unique
/// within the domain, non-zero, and an lkey never equals an rkey.
///
/// Both kinds of key live in one open-addressing table (linear probing,
/// at most half full, backward-shift deletion): a lookup or a fresh key
/// touches one or two adjacent slots however many registrations the domain
/// holds, and a registration costs no node allocation.  That keeps the
/// per-message registration of a rendezvous as cheap beside thousands of
/// idle connections as beside none.
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

  /// Returns the number of key slots (a power of two, at least twice the
  /// number of keys); for tests.
  size_t capacity() const;

private:
  /// One key and the registration it names; `key == 0` marks a free slot.
  struct slot {
    uint32_t key = 0;
    registration_ptr reg;
  };

  /// The smallest table, in slots.
  static constexpr size_t min_slots = 64;

  size_t home_of(uint32_t key) const noexcept;
  const slot* find_slot_locked(uint32_t key) const noexcept;
  void insert_locked(uint32_t key, registration_ptr reg);
  void erase_locked(const slot* s) noexcept;
  void rehash_locked(size_t slots);
  uint32_t fresh_key_locked();

  mutable std::shared_mutex mtx_;
  /// The key table: a power-of-two number of slots.
  std::vector<slot> slots_;
  /// log2 of `slots_.size()`.
  unsigned bits_ = 0;
  /// Occupied slots: two per registration.
  size_t keys_ = 0;
  std::mt19937 rng_;
};

} // namespace rdmactor::transport::soft
