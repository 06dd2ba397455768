#include "rdmactor/unexpected.hpp"

#include <atomic>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/sec.hpp>
#include <caf/type_erased_tuple.hpp>

#include "common/logging.hpp"
#include "common/rate_limiter.hpp"

namespace rdmactor {

namespace {

std::atomic<uint64_t> dropped{0};

} // namespace

caf::result<caf::message> drop_unexpected(caf::scheduled_actor* self,
                                          caf::message_view& x) {
  dropped.fetch_add(1, std::memory_order_relaxed);
  auto v = shared_log_budget("unexpected_messages")
               .take(rate_limiter::clock_type::now());
  if (v) {
    auto& types = self->home_system().types();
    const auto& content = x.content();
    std::string names;
    for (size_t i = 0; i < content.size(); ++i) {
      if (i > 0)
        names += ", ";
      names += types.portable_name(content.type(i));
    }
    log().warn("actor {} ({}) dropped a message it does not handle: ({}){}",
               self->id(), self->name(), names,
               suppressed_note(v.denied_before));
  }
  return caf::sec::unexpected_message;
}

uint64_t unexpected_messages() noexcept {
  return dropped.load(std::memory_order_relaxed);
}

} // namespace rdmactor
