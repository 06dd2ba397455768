#pragma once

#include <caf/actor_system_config.hpp>

#include "common/options.hpp"

namespace rdmactor {

/// A CAF configuration that knows rdmactor: binds `options` to the section
/// `[rdmactor]` of the ini file and to `--rdmactor.NAME=VALUE` on the
/// command line, and registers the `rdmactor` error category.
///
/// Derive from it to add options of your own, then
/// `cfg.parse(argc, argv, "rdmactor.ini")` as with any CAF config.
class config : public caf::actor_system_config {
public:
  config();

  /// The options, filled in by `parse`.  Validate with `validate(opts)`.
  options opts;
};

} // namespace rdmactor
