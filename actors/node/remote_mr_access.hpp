#pragma once

#include <memory>

#include "rdmactor/remote_mr.hpp"

namespace rdmactor::detail {

/// Internal: the agent's access to the shared state of a remote_mr (its
/// token, its agent, its release flag and lease), which users do not see.
struct remote_mr_access {
  static const std::shared_ptr<remote_mr_state>& state(const remote_mr& x) {
    return x.state_;
  }
};

} // namespace rdmactor::detail

namespace rdmactor::detail {

/// Shorthand for `remote_mr_access::state(x)`.
inline const std::shared_ptr<remote_mr_state>& state_of(const remote_mr& x) {
  return remote_mr_access::state(x);
}

} // namespace rdmactor::detail
