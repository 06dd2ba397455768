#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <shared_mutex>

#include "rdmactor/transport/fabric.hpp"

namespace rdmactor::transport::soft {

/// One memory registration of a protection domain.
///
/// The soft fabric touches registered memory (the "NIC" placing or reading
/// data) only while it holds `mtx` shared and `valid` is true.
/// Deregistration takes `mtx` exclusively and clears `valid`, so it waits
/// for an access in progress and no access follows it.  Every such access
/// is one memcpy or one non-blocking socket call, so deregistration never
/// waits long.
struct registration {
  registration(uint8_t* base_addr, size_t len, uint32_t access_flags,
               uint32_t local_key, uint32_t remote_key) noexcept
      : base(base_addr), length(len), access(access_flags), lkey(local_key),
        rkey(remote_key) {}

  /// Returns true when [addr, addr + len) lies inside the registration.
  bool contains(uint64_t addr, uint64_t len) const noexcept {
    auto b = reinterpret_cast<uintptr_t>(base);
    return addr >= b && len <= length && addr - b <= length - len;
  }

  uint8_t* const base;
  const size_t length;
  const uint32_t access;
  const uint32_t lkey;
  const uint32_t rkey;

  /// Shared while memory is touched; exclusive to invalidate.
  mutable std::shared_mutex mtx;
  /// False once deregistered.  Guarded by `mtx`.
  bool valid = true;
};

using registration_ptr = std::shared_ptr<registration>;

/// A range of registered memory: bytes the fabric may touch while the
/// registration stays valid.
struct guarded_range {
  registration_ptr reg;
  uint8_t* ptr = nullptr;
  size_t len = 0;
};

/// The non-empty ranges of one scatter/gather list (at most `max_sge`).
struct range_list {
  std::array<guarded_range, max_sge> items;
  size_t size = 0;

  /// Returns the sum of the lengths.
  uint64_t total_bytes() const noexcept {
    uint64_t n = 0;
    for (size_t i = 0; i < size; ++i)
      n += items[i].len;
    return n;
  }
};

/// Holds the shared locks of up to `capacity` registrations at once (the
/// payloads of the frames one `sendmsg` gathers).  It locks them in address
/// order (skipping duplicates), so two holders never deadlock, and reports
/// whether all of them are still valid.
class shared_touch {
public:
  /// Registrations held at most.
  static constexpr size_t capacity = 64;
  static_assert(capacity >= max_sge, "a frame's payload always fits");

  shared_touch() = default;
  shared_touch(const shared_touch&) = delete;
  shared_touch& operator=(const shared_touch&) = delete;

  ~shared_touch() {
    release();
  }

  /// Adds a registration to lock; call before `acquire`.  Returns false
  /// (and adds nothing) when it is new and `capacity` are held already.
  bool add(const registration* reg) noexcept;

  /// Returns how many distinct registrations were added.
  size_t size() const noexcept {
    return n_;
  }

  /// Forgets the registrations added after the first `n`; before `acquire`.
  void truncate(size_t n) noexcept {
    if (n < n_)
      n_ = n;
  }

  /// Locks every added registration; returns true when all are valid.
  bool acquire();

  /// Unlocks what `acquire` locked.
  void release() noexcept;

private:
  std::array<const registration*, capacity> regs_{};
  size_t n_ = 0;
  bool locked_ = false;
};

} // namespace rdmactor::transport::soft
