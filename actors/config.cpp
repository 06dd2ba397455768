#include "actors/config.hpp"

#include "common/error.hpp"

namespace rdmactor {

config::config() {
  add_options(custom_options_, opts);
  // A transport actor that polls its CQ (completion-mode busy or adaptive)
  // reschedules itself; CAF lets an actor keep its worker for this many
  // messages before others run (unbounded by default, which would let a
  // polling actor starve the actors queued behind it on its worker).  The
  // ini file or the command line may override it.
  set("scheduler.max-throughput", default_max_throughput);
  register_error_category(*this);
}

} // namespace rdmactor
