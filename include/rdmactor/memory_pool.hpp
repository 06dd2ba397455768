#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <caf/expected.hpp>

#include "rdmactor/local_mr.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor {

/// Byte and registration accounting of a memory pool.
struct allocator_stats {
  /// Bytes handed out and not yet returned (rounded to the granule).
  uint64_t bytes_in_use = 0;
  /// Live allocations.
  uint64_t allocations = 0;
  /// Registrations held (shared arenas + dedicated large ones).
  uint64_t arenas = 0;
  /// Bytes registered with the fabric.
  uint64_t registered_bytes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, allocator_stats& x) {
  return f(x.bytes_in_use, x.allocations, x.arenas, x.registered_bytes);
}

/// Registered memory, sub-allocated by size and alignment (thread-safe).
///
/// Arenas of `arena_size_bytes` are registered once per access-flag set and
/// carved first-fit with coalescing frees; an allocation larger than an
/// arena (or aligned beyond a page) gets its own registration, released
/// with it.  Memory is zeroed before it is handed out (unless the caller
/// overwrites it at once), so a peer never sees another user's bytes.  Handles
/// return their memory from any thread when the last copy goes; the pool lives
/// as long as any handle.
class memory_pool : public std::enable_shared_from_this<memory_pool> {
public:
  /// Allocation granule: sizes round up to it, offsets align to it.
  static constexpr uint64_t granule_bytes = 64;
  /// Largest alignment served from a shared arena.
  static constexpr uint64_t arena_align_bytes = 4096;
  /// Largest alignment at all (a 2 MiB huge page): a dedicated
  /// registration rounds its size up to the alignment.
  static constexpr uint64_t max_align_bytes = uint64_t{1} << 21;

  static_assert((granule_bytes & (granule_bytes - 1)) == 0);
  static_assert(arena_align_bytes % granule_bytes == 0);
  static_assert(max_align_bytes % arena_align_bytes == 0);

  memory_pool(transport::device_ptr dev, uint64_t arena_size_bytes,
              uint64_t max_alloc_bytes);

  ~memory_pool();

  /// Whose memory an allocation is.  Arenas are shared only within one
  /// owner and one access-flag set, so that an rkey handed to a peer for
  /// an AllocMR region (`peers`) never opens a user allocation (`user`)
  /// registered with the same flags.
  enum class owner : uint8_t { user, peers };

  /// Allocates `size` bytes aligned to `align` with `access` flags, zeroed
  /// unless `zeroed` is false (for callers that overwrite every byte at
  /// once), from arenas of `who`.  On a device without atomics
  /// (`supports_atomics`) `access::remote_atomic` is dropped.  Errors:
  /// `invalid_layout` (align 0, not a power of two or over
  /// max_align_bytes), `size_limit` (over max_alloc_bytes),
  /// `out_of_memory`/`registration_failed`.
  caf::expected<local_mr> allocate(uint64_t size, uint64_t align,
                                   uint32_t access, bool zeroed = true,
                                   owner who = owner::user);

  /// Allocates `size` zeroed bytes, page-aligned, with `access` flags in a
  /// registration of their own (released with the last handle): the rkey
  /// of the returned memory opens exactly that memory (rounded up to the
  /// granule), nothing else of this node.  For memory lent to one peer with
  /// `send_mr` (a table peers read, a log a leader writes): an rkey opens
  /// its whole registration, and an arena may hold other memory with the
  /// same flags.  Costs one registration per call (a system call on verbs):
  /// allocate once, keep it.  Errors as for `allocate`.  Any thread.
  caf::expected<local_mr> allocate_dedicated(uint64_t size, uint32_t access);

  /// Registers the range of `mr` (memory of this pool) once more, with the
  /// access rights of the registration it lives in: a registration (and
  /// rkey) of its own that can be revoked alone (leases).  The caller keeps
  /// `mr` alive at least as long as the registration.  `invalid_argument`
  /// when `mr` is not memory of this pool.
  caf::expected<std::unique_ptr<transport::memory_region>>
  register_again(const local_mr& mr);

  /// Registers the range of `mr` (any memory, e.g. a user's buffer or a
  /// received chunk) once more, for remote read only: a registration of its
  /// own whose rkey opens exactly that range, so that a peer reading a
  /// rendezvous payload reaches nothing else.  The caller keeps `mr` alive
  /// at least as long as the registration.  Called by the agent core for
  /// send_data over the eager size (agent_core_rendezvous.cpp).
  caf::expected<std::unique_ptr<transport::memory_region>>
  register_for_peer_read(const local_mr& mr);

  /// Checks a layout without allocating: `invalid_layout` or `size_limit`.
  caf::error check_layout(uint64_t size, uint64_t align) const;

  /// Returns the current accounting.
  allocator_stats stats() const;

private:
  struct arena {
    uint8_t* mem = nullptr;
    uint64_t size = 0;
    uint32_t access = 0;
    owner who = owner::user;
    bool dedicated = false;
    std::unique_ptr<transport::memory_region> reg;
    std::map<uint64_t, uint64_t> free_list; // offset -> length
  };

  caf::expected<local_mr> allocate_in(uint64_t size, uint64_t align,
                                      uint32_t access, bool zeroed, owner who,
                                      bool dedicated);
  caf::expected<arena*> add_arena(uint64_t size, uint64_t align,
                                  uint32_t access, bool dedicated);
  void release(arena* a, uint64_t offset, uint64_t length);

  transport::device_ptr dev_;
  uint64_t arena_size_;
  uint64_t max_alloc_;
  mutable std::mutex mtx_;
  std::vector<std::unique_ptr<arena>> arenas_;
  allocator_stats stats_;
};

using memory_pool_ptr = std::shared_ptr<memory_pool>;

} // namespace rdmactor
