#pragma once

#include <string>

namespace rdmactor::detail {

/// Where a program finds rdmactor's config file when the command line
/// names none (`--config-file`), first match wins:
/// 1. `env_value` (the `RDMACTOR_CONFIG` environment variable), when set
///    and not empty, whether or not the file exists (CAF then reads none);
/// 2. `<dir of exe_path>/../share/rdmactor/rdmactor.ini`, where
///    `cmake --install` puts it beside the installed programs;
/// 3. `source_ini` (the source tree's config/rdmactor.ini, for programs
///    run from the build tree), when it exists.
/// Returns "" when nothing matches.
std::string find_config_file(const char* env_value, const std::string& exe_path,
                             const std::string& source_ini);

} // namespace rdmactor::detail
