#include "common/config_file.hpp"

#include <cstdlib>

#include <sys/stat.h>
#include <unistd.h>

#include "rdmactor/config.hpp"

namespace rdmactor::detail {

namespace {

bool is_file(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

} // namespace

std::string find_config_file(const char* env_value, const std::string& exe_path,
                             const std::string& source_ini) {
  if (env_value != nullptr && *env_value != '\0')
    return env_value;
  if (auto slash = exe_path.rfind('/'); slash != std::string::npos) {
    auto installed
        = exe_path.substr(0, slash) + "/../share/rdmactor/rdmactor.ini";
    if (is_file(installed))
      return installed;
  }
  if (is_file(source_ini))
    return source_ini;
  return {};
}

} // namespace rdmactor::detail

namespace rdmactor {

std::string default_config_file() {
  std::string exe;
  char buf[4096];
  auto n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0)
    exe.assign(buf, static_cast<size_t>(n));
  return detail::find_config_file(std::getenv("RDMACTOR_CONFIG"), exe,
                                  RDMACTOR_SOURCE_INI);
}

} // namespace rdmactor
