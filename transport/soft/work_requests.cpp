#include "transport/soft/work_requests.hpp"

#include <string>

#include "rdmactor/error.hpp"
#include "transport/soft/protection_domain.hpp"

namespace rdmactor::transport::soft {

caf::error check_sg(const sge* sg, size_t n) {
  if (n > max_sge)
    return make_error(errc::invalid_argument,
                      "a work request takes at most " + std::to_string(max_sge)
                          + " scatter/gather elements, got "
                          + std::to_string(n));
  if (n > 0 && sg == nullptr)
    return make_error(errc::invalid_argument,
                      "null scatter/gather list with n > 0");
  return {};
}

uint64_t total_of(const sge* sg, size_t n) noexcept {
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i)
    sum += sg[i].length;
  return sum;
}

bool resolve_local(const protection_domain& pd, const sge* sg, size_t n,
                   uint32_t needed, range_list& out) {
  for (size_t i = 0; i < n; ++i) {
    if (sg[i].length == 0)
      continue;
    auto reg = pd.find_local(sg[i].lkey, sg[i].addr, sg[i].length, needed);
    if (!reg)
      return false;
    auto offset = sg[i].addr - reinterpret_cast<uintptr_t>(reg->base);
    guarded_range range;
    range.ptr = reg->base + offset;
    range.len = sg[i].length;
    range.reg = std::move(reg);
    out.items[out.size++] = std::move(range);
  }
  return true;
}

posted_recv make_posted_recv(const protection_domain& pd, uint64_t wr_id,
                             const sge* sg, size_t n) {
  posted_recv r;
  r.wr_id = wr_id;
  r.valid = resolve_local(pd, sg, n, access::local_write, r.ranges);
  r.capacity = total_of(sg, n);
  return r;
}

} // namespace rdmactor::transport::soft
