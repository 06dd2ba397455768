#pragma once

#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

namespace rdmactor::bench {

/// Sends an exit message to an actor when the guard goes, so that no
/// actor outlives its purpose and `~actor_system` does not wait forever.
template <class Handle>
class actor_guard {
public:
  explicit actor_guard(Handle hdl) : hdl_(std::move(hdl)) {}

  actor_guard(const actor_guard&) = delete;
  actor_guard& operator=(const actor_guard&) = delete;

  ~actor_guard() {
    if (hdl_)
      caf::anon_send_exit(hdl_, caf::exit_reason::user_shutdown);
  }

  const Handle& get() const noexcept {
    return hdl_;
  }

private:
  Handle hdl_;
};

} // namespace rdmactor::bench
