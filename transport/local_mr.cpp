#include "rdmactor/local_mr.hpp"

#include <string>

#include "rdmactor/error.hpp"

namespace rdmactor {

caf::expected<local_mr> local_mr::slice(size_t offset, size_t length) const {
  if (offset > length_ || length > length_ - offset)
    return make_error(errc::out_of_bounds,
                      "slice [" + std::to_string(offset) + ", +"
                          + std::to_string(length) + ") of a "
                          + std::to_string(length_) + "-byte memory region");
  local_mr out = *this;
  out.offset_ = offset_ + offset;
  out.length_ = length;
  return out;
}

} // namespace rdmactor
