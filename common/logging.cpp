#include "common/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace rdmactor {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto lg = std::make_shared<spdlog::logger>("rdmactor", sink);
    lg->set_pattern("%H:%M:%S.%e %^%l%$ [rdmactor] %v");
    lg->set_level(spdlog::level::info);
    return lg;
  }();
  return *instance;
}

bool set_log_level(const std::string& level) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    return false;
  log().set_level(lvl);
  return true;
}

} // namespace rdmactor
