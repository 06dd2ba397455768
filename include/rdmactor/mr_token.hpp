#pragma once

#include <cstdint>
#include <string>

namespace rdmactor {

/// Names a range of registered memory on some node: what a peer needs to
/// access it with RDMA WRITE/READ.  An rkey grants access to the whole
/// registration it belongs to; the range is advisory for the peer but is
/// enforced by our own checks before posting.
struct mr_token {
  uint64_t addr = 0;
  uint64_t len = 0;
  uint32_t rkey = 0;

  /// Returns the sub-range [offset, offset + length) or false when it does
  /// not fit.
  bool slice(uint64_t offset, uint64_t length, mr_token& out) const noexcept {
    if (offset > len || length > len - offset)
      return false;
    out = mr_token{addr + offset, length, rkey};
    return true;
  }

  friend bool operator==(const mr_token& x, const mr_token& y) noexcept {
    return x.addr == y.addr && x.len == y.len && x.rkey == y.rkey;
  }
  friend bool operator!=(const mr_token& x, const mr_token& y) noexcept {
    return !(x == y);
  }
  friend bool operator<(const mr_token& x, const mr_token& y) noexcept {
    if (x.addr != y.addr)
      return x.addr < y.addr;
    if (x.len != y.len)
      return x.len < y.len;
    return x.rkey < y.rkey;
  }
};

/// Lets CAF print and serialize tokens.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, mr_token& x) {
  return f(x.addr, x.len, x.rkey);
}

} // namespace rdmactor
