#include "transport/soft/atomics.hpp"

#include <cstring>
#include <shared_mutex>

#include "transport/soft/protection_domain.hpp"

namespace rdmactor::transport::soft {

atomic_outcome atomic_unit::execute(const protection_domain& pd, atomic_op op,
                                    uint32_t rkey, uint64_t addr,
                                    uint64_t compare_add, uint64_t swap) {
  atomic_outcome out;
  auto reg
      = pd.find_remote(rkey, addr, atomic_word_bytes, access::remote_atomic);
  if (!reg) {
    out.status = wc_status::remote_access_error;
    out.why = "the word is not inside a registration of the rkey with "
              "remote_atomic access";
    return out;
  }
  if (addr % atomic_word_bytes != 0) {
    out.status = wc_status::remote_operation_error;
    out.why = "the word is not 8-byte aligned";
    return out;
  }
  auto* ptr = reg->base + (addr - reinterpret_cast<uintptr_t>(reg->base));
  std::lock_guard<std::mutex> word_guard{stripe(addr)};
  std::shared_lock<std::shared_mutex> reg_guard{reg->mtx};
  if (!reg->valid) {
    out.status = wc_status::remote_access_error;
    out.why = "the word's registration was deregistered";
    return out;
  }
  uint64_t old = 0;
  std::memcpy(&old, ptr, sizeof(old));
  uint64_t next = old;
  switch (op) {
    case atomic_op::fetch_add:
      next = old + compare_add;
      break;
    case atomic_op::compare_swap:
      if (old == compare_add)
        next = swap;
      break;
  }
  if (next != old)
    std::memcpy(ptr, &next, sizeof(next));
  out.old_value = old;
  return out;
}

} // namespace rdmactor::transport::soft
