#include "rdmactor/memory_pool.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

#include "rdmactor/error.hpp"

namespace rdmactor {

namespace {

uint64_t round_up(uint64_t x, uint64_t to) {
  return (x + to - 1) / to * to;
}

bool is_pow2(uint64_t x) {
  return x != 0 && (x & (x - 1)) == 0;
}

} // namespace

memory_pool::memory_pool(transport::device_ptr dev, uint64_t arena_size_bytes,
                         uint64_t max_alloc_bytes)
    : dev_(std::move(dev)),
      arena_size_(round_up(arena_size_bytes, arena_align_bytes)),
      max_alloc_(max_alloc_bytes) {}

memory_pool::~memory_pool() {
  for (auto& a : arenas_) {
    a->reg.reset();
    std::free(a->mem);
  }
}

caf::expected<memory_pool::arena*> memory_pool::add_arena(uint64_t size,
                                                          uint64_t align,
                                                          uint32_t access,
                                                          bool dedicated) {
  auto a = std::make_unique<arena>();
  // aligned_alloc wants a size that is a multiple of the alignment.
  auto al = std::max(align, arena_align_bytes);
  a->size = round_up(size, al);
  a->mem = static_cast<uint8_t*>(std::aligned_alloc(al, a->size));
  if (a->mem == nullptr)
    return make_error(errc::out_of_memory, "cannot allocate "
                                               + std::to_string(a->size)
                                               + " bytes for a memory arena");
  auto reg = dev_->register_memory(a->mem, a->size, access);
  if (!reg) {
    std::free(a->mem);
    return std::move(reg.error());
  }
  a->reg = std::move(*reg);
  a->access = access;
  a->dedicated = dedicated;
  a->free_list.emplace(0, a->size);
  stats_.arenas += 1;
  stats_.registered_bytes += a->size;
  arenas_.emplace_back(std::move(a));
  return arenas_.back().get();
}

caf::error memory_pool::check_layout(uint64_t size, uint64_t align) const {
  if (!is_pow2(align))
    return make_error(errc::invalid_layout, "alignment " + std::to_string(align)
                                                + " is not a power of two");
  if (align > max_align_bytes)
    return make_error(errc::invalid_layout,
                      "alignment " + std::to_string(align) + " exceeds "
                          + std::to_string(max_align_bytes)
                          + " bytes; align to a page or a huge page at most");
  if (size > max_alloc_)
    return make_error(errc::size_limit, "allocation of " + std::to_string(size)
                                            + " bytes exceeds max-alloc-bytes ("
                                            + std::to_string(max_alloc_) + ")");
  return {};
}

caf::expected<local_mr> memory_pool::allocate(uint64_t size, uint64_t align,
                                              uint32_t access, bool zeroed,
                                              owner who) {
  return allocate_in(size, align, access, zeroed, who, false);
}

caf::expected<local_mr> memory_pool::allocate_dedicated(uint64_t size,
                                                        uint32_t access) {
  return allocate_in(size, arena_align_bytes, access, true, owner::user, true);
}

caf::expected<local_mr> memory_pool::allocate_in(uint64_t size, uint64_t align,
                                                 uint32_t access, bool zeroed,
                                                 owner who, bool dedicated) {
  if (auto err = check_layout(size, align))
    return err;
  // A device without atomics refuses remote_atomic registrations: such
  // memory simply has no remote-atomic access (atomics on it fail anyway).
  if (!dev_->supports_atomics())
    access &= ~transport::access::remote_atomic;
  auto len = round_up(std::max<uint64_t>(size, 1), granule_bytes);
  auto al = std::max(align, granule_bytes);
  std::unique_lock<std::mutex> guard{mtx_};
  arena* target = nullptr;
  uint64_t offset = 0;
  if (!dedicated && len <= arena_size_ && al <= arena_align_bytes) {
    for (auto& a : arenas_) {
      if (a->dedicated || a->access != access || a->who != who)
        continue;
      for (auto& [off, flen] : a->free_list) {
        auto start = round_up(off, al);
        if (start - off + len <= flen) {
          target = a.get();
          offset = start;
          break;
        }
      }
      if (target)
        break;
    }
    if (!target) {
      auto a = add_arena(arena_size_, arena_align_bytes, access, false);
      if (!a)
        return std::move(a.error());
      (*a)->who = who;
      target = *a;
      offset = 0;
    }
  } else {
    auto a = add_arena(len, al, access, true);
    if (!a)
      return std::move(a.error());
    (*a)->who = who;
    target = *a;
    offset = 0;
  }
  // Carve [offset, offset + len) out of the free block that holds it.
  auto it = target->free_list.upper_bound(offset);
  --it;
  auto blk_off = it->first;
  auto blk_len = it->second;
  target->free_list.erase(it);
  if (offset > blk_off)
    target->free_list.emplace(blk_off, offset - blk_off);
  if (blk_off + blk_len > offset + len)
    target->free_list.emplace(offset + len, blk_off + blk_len - offset - len);
  stats_.bytes_in_use += len;
  stats_.allocations += 1;
  guard.unlock();
  auto* data = target->mem + offset;
  if (zeroed)
    std::memset(data, 0, size);
  auto self = shared_from_this();
  auto block = std::make_shared<mr_block>(
      data, size, target->reg->lkey(), target->reg->rkey(),
      [self, target, offset, len] { self->release(target, offset, len); });
  return local_mr{std::move(block)};
}

void memory_pool::release(arena* a, uint64_t offset, uint64_t length) {
  std::lock_guard<std::mutex> guard{mtx_};
  stats_.bytes_in_use -= length;
  stats_.allocations -= 1;
  if (a->dedicated) {
    for (auto i = arenas_.begin(); i != arenas_.end(); ++i) {
      if (i->get() == a) {
        stats_.arenas -= 1;
        stats_.registered_bytes -= a->size;
        a->reg.reset();
        std::free(a->mem);
        arenas_.erase(i);
        return;
      }
    }
    return;
  }
  // Insert and coalesce with the neighbours.
  auto next = a->free_list.lower_bound(offset);
  if (next != a->free_list.end() && offset + length == next->first) {
    length += next->second;
    next = a->free_list.erase(next);
  }
  if (next != a->free_list.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += length;
      return;
    }
  }
  a->free_list.emplace(offset, length);
}

allocator_stats memory_pool::stats() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return stats_;
}

caf::expected<std::unique_ptr<transport::memory_region>>
memory_pool::register_again(const local_mr& mr) {
  if (!mr.valid() || mr.size() == 0)
    return make_error(errc::invalid_argument,
                      "a lease needs a non-empty local_mr");
  uint32_t access = 0;
  bool found = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& a : arenas_) {
      if (mr.data() >= a->mem && mr.data() + mr.size() <= a->mem + a->size) {
        access = a->access;
        found = true;
        break;
      }
    }
  }
  if (!found)
    return make_error(errc::invalid_argument,
                      "a lease needs memory from the node's allocator "
                      "(alloc_local_mr), not a receive buffer");
  return dev_->register_memory(mr.data(), mr.size(), access);
}

caf::expected<std::unique_ptr<transport::memory_region>>
memory_pool::register_for_peer_read(const local_mr& mr) {
  if (!mr.valid() || mr.size() == 0)
    return make_error(errc::invalid_argument,
                      "a rendezvous needs a non-empty local_mr");
  return dev_->register_memory(mr.data(), mr.size(),
                               transport::access::remote_read);
}

} // namespace rdmactor
