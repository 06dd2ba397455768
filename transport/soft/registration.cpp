#include "transport/soft/registration.hpp"

#include <algorithm>

namespace rdmactor::transport::soft {

bool shared_touch::add(const registration* reg) noexcept {
  if (reg == nullptr)
    return true;
  for (size_t i = 0; i < n_; ++i)
    if (regs_[i] == reg)
      return true;
  if (n_ == regs_.size())
    return false;
  regs_[n_++] = reg;
  return true;
}

bool shared_touch::acquire() {
  std::sort(regs_.begin(), regs_.begin() + static_cast<ptrdiff_t>(n_),
            std::less<const registration*>{});
  for (size_t i = 0; i < n_; ++i)
    regs_[i]->mtx.lock_shared();
  locked_ = true;
  for (size_t i = 0; i < n_; ++i)
    if (!regs_[i]->valid)
      return false;
  return true;
}

void shared_touch::release() noexcept {
  if (!locked_)
    return;
  for (size_t i = n_; i > 0; --i)
    regs_[i - 1]->mtx.unlock_shared();
  locked_ = false;
}

} // namespace rdmactor::transport::soft
