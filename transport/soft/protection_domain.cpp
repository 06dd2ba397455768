#include "transport/soft/protection_domain.hpp"

#include <mutex>

#include "rdmactor/error.hpp"

namespace rdmactor::transport::soft {

namespace {

registration_ptr lookup(const std::unordered_map<uint32_t, registration_ptr>& m,
                        uint32_t key, uint64_t addr, uint64_t len,
                        uint32_t needed) {
  auto i = m.find(key);
  if (i == m.end())
    return nullptr;
  auto& reg = i->second;
  if ((reg->access & needed) != needed || !reg->contains(addr, len))
    return nullptr;
  return reg;
}

} // namespace

protection_domain::protection_domain() : rng_(std::random_device{}()) {
  // nop
}

uint32_t protection_domain::fresh_key_locked() {
  for (;;) {
    auto key = static_cast<uint32_t>(rng_());
    if (key != 0 && by_lkey_.count(key) == 0 && by_rkey_.count(key) == 0)
      return key;
  }
}

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
  by_lkey_.emplace(lkey, nullptr);
  auto rkey = fresh_key_locked();
  auto reg = std::make_shared<registration>(static_cast<uint8_t*>(addr), len,
                                            access, lkey, rkey);
  by_lkey_[lkey] = reg;
  by_rkey_.emplace(rkey, reg);
  return reg;
}

void protection_domain::remove(const registration_ptr& reg) noexcept {
  if (!reg)
    return;
  {
    std::unique_lock<std::shared_mutex> guard{mtx_};
    by_lkey_.erase(reg->lkey);
    by_rkey_.erase(reg->rkey);
  }
  std::unique_lock<std::shared_mutex> guard{reg->mtx};
  reg->valid = false;
}

registration_ptr protection_domain::find_local(uint32_t lkey, uint64_t addr,
                                               uint64_t len,
                                               uint32_t needed) const {
  std::shared_lock<std::shared_mutex> guard{mtx_};
  return lookup(by_lkey_, lkey, addr, len, needed);
}

registration_ptr protection_domain::find_remote(uint32_t rkey, uint64_t addr,
                                                uint64_t len,
                                                uint32_t needed) const {
  std::shared_lock<std::shared_mutex> guard{mtx_};
  return lookup(by_rkey_, rkey, addr, len, needed);
}

size_t protection_domain::size() const {
  std::shared_lock<std::shared_mutex> guard{mtx_};
  return by_lkey_.size();
}

} // namespace rdmactor::transport::soft
