#include "transport/soft/protection_domain.hpp"

#include <mutex>
#include <new>

#include "rdmactor/error.hpp"

namespace rdmactor::transport::soft {

namespace {

/// Returns `reg` when it has every flag of `needed` and contains the range.
registration_ptr checked(const registration_ptr& reg, uint64_t addr,
                         uint64_t len, uint32_t needed) {
  if ((reg->access & needed) != needed || !reg->contains(addr, len))
    return nullptr;
  return reg;
}

} // namespace

protection_domain::protection_domain() : rng_(std::random_device{}()) {
  rehash_locked(min_slots);
}

// -- the key table ------------------------------------------------------------

/// The slot a key probes first (Fibonacci hashing: the top bits of the
/// product).
size_t protection_domain::home_of(uint32_t key) const noexcept {
  return static_cast<uint32_t>(key * 2654435769u) >> (32 - bits_);
}

const protection_domain::slot*
protection_domain::find_slot_locked(uint32_t key) const noexcept {
  if (key == 0)
    return nullptr;
  auto mask = slots_.size() - 1;
  for (auto i = home_of(key);; i = (i + 1) & mask) {
    auto& s = slots_[i];
    if (s.key == key)
      return &s;
    if (s.key == 0)
      return nullptr;
  }
}

void protection_domain::insert_locked(uint32_t key, registration_ptr reg) {
  if ((keys_ + 1) * 2 > slots_.size())
    rehash_locked(slots_.size() * 2);
  auto mask = slots_.size() - 1;
  auto i = home_of(key);
  while (slots_[i].key != 0)
    i = (i + 1) & mask;
  slots_[i].key = key;
  slots_[i].reg = std::move(reg);
  ++keys_;
}

/// Empties the occupied slot `s` and moves later members of its probe run
/// back, so no lookup ever needs a tombstone.
void protection_domain::erase_locked(const slot* s) noexcept {
  auto mask = slots_.size() - 1;
  auto hole = static_cast<size_t>(s - slots_.data());
  for (auto j = (hole + 1) & mask; slots_[j].key != 0; j = (j + 1) & mask) {
    auto home = home_of(slots_[j].key);
    // The entry at j stays when its home lies cyclically in (hole, j].
    bool stays
        = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays)
      continue;
    slots_[hole] = std::move(slots_[j]);
    hole = j;
  }
  slots_[hole].key = 0;
  slots_[hole].reg.reset();
  --keys_;
  if (slots_.size() > min_slots && keys_ * 8 < slots_.size()) {
    // Shrinking is optional: without memory for the smaller table, the
    // larger one stays.
    try {
      rehash_locked(slots_.size() / 2);
    } catch (const std::bad_alloc&) {
      // keep the current table
    }
  }
}

void protection_domain::rehash_locked(size_t slots) {
  std::vector<slot> fresh(slots);
  std::vector<slot> old;
  old.swap(slots_);
  slots_.swap(fresh);
  bits_ = 0;
  while ((size_t{1} << bits_) < slots)
    ++bits_;
  keys_ = 0;
  for (auto& s : old)
    if (s.key != 0)
      insert_locked(s.key, std::move(s.reg));
}

uint32_t protection_domain::fresh_key_locked() {
  for (;;) {
    auto key = static_cast<uint32_t>(rng_());
    if (key != 0 && find_slot_locked(key) == nullptr)
      return key;
  }
}

// -- registrations ------------------------------------------------------------

caf::expected<registration_ptr> protection_domain::add(void* addr, size_t len,
                                                       uint32_t access) {
  if (addr == nullptr || len == 0)
    return make_error(errc::invalid_argument,
                      "register_memory: address must be non-null and length "
                      "non-zero");
  if ((access & ~access::all) != 0)
    return make_error(errc::invalid_argument,
                      "register_memory: unknown access flags "
                          + std::to_string(access)
                          + "; use rdmactor::transport::access");
  if ((access & access::remote_write) && !(access & access::local_write))
    return make_error(errc::invalid_argument,
                      "register_memory: remote_write requires local_write "
                      "(as in verbs)");
  auto base = reinterpret_cast<uintptr_t>(addr);
  if (base + len < base)
    return make_error(errc::invalid_argument,
                      "register_memory: range wraps around the address "
                      "space");
  std::unique_lock<std::shared_mutex> guard{mtx_};
  auto lkey = fresh_key_locked();
  auto rkey = fresh_key_locked();
  while (rkey == lkey)
    rkey = fresh_key_locked();
  auto reg = std::make_shared<registration>(static_cast<uint8_t*>(addr), len,
                                            access, lkey, rkey);
  insert_locked(lkey, reg);
  insert_locked(rkey, reg);
  return reg;
}

void protection_domain::remove(const registration_ptr& reg) noexcept {
  if (!reg)
    return;
  {
    std::unique_lock<std::shared_mutex> guard{mtx_};
    // Only this registration's own keys (a second remove is a no-op).
    for (auto key : {reg->lkey, reg->rkey})
      if (auto* s = find_slot_locked(key); s != nullptr && s->reg == reg)
        erase_locked(s);
  }
  std::unique_lock<std::shared_mutex> guard{reg->mtx};
  reg->valid = false;
}

registration_ptr protection_domain::find_local(uint32_t lkey, uint64_t addr,
                                               uint64_t len,
                                               uint32_t needed) const {
  std::shared_lock<std::shared_mutex> guard{mtx_};
  auto* s = find_slot_locked(lkey);
  if (s == nullptr || s->reg->lkey != lkey)
    return nullptr;
  return checked(s->reg, addr, len, needed);
}

registration_ptr protection_domain::find_remote(uint32_t rkey, uint64_t addr,
                                                uint64_t len,
                                                uint32_t needed) const {
  std::shared_lock<std::shared_mutex> guard{mtx_};
  auto* s = find_slot_locked(rkey);
  if (s == nullptr || s->reg->rkey != rkey)
    return nullptr;
  return checked(s->reg, addr, len, needed);
}

size_t protection_domain::size() const {
  std::shared_lock<std::shared_mutex> guard{mtx_};
  return keys_ / 2;
}

size_t protection_domain::capacity() const {
  std::shared_lock<std::shared_mutex> guard{mtx_};
  return slots_.size();
}

} // namespace rdmactor::transport::soft
