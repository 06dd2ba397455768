#include "actors/config.hpp"

#include <caf/settings.hpp>

#include "common/error.hpp"

namespace rdmactor {

config::config() {
  add_options(custom_options_, opts);
  // A transport actor that polls its CQ (completion-mode busy or adaptive)
  // reschedules itself; CAF lets an actor keep its worker for this many
  // messages before others run (unbounded by default, which would let a
  // polling actor starve the actors queued behind it on its worker).  The
  // ini file or the command line may override it.
  // Written into the settings directly: `set` validates through the
  // option's meta data, which crashed in clang builds against Debian's
  // gcc-built libcaf (the libFuzzer target).
  caf::put(content, "scheduler.max-throughput",
           static_cast<int64_t>(default_max_throughput));
  register_error_category(*this);
}

} // namespace rdmactor
