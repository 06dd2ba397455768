#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace rdmactor {

/// Returns the process-wide rdmactor logger (stderr, created on first use).
/// CAF's own logging is compiled out in Debian's build, so rdmactor logs
/// through spdlog.  Thread-safe.
spdlog::logger& log();

/// Sets the level of `log()` from a name (trace, debug, info, warn, error,
/// off); unknown names leave the level unchanged and return false.
bool set_log_level(const std::string& level);

} // namespace rdmactor
