#pragma once

// Counts the lines rdmactor's logger writes while a test runs (besides
// stderr), by level, so that tests can assert "no warnings".

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <spdlog/sinks/base_sink.h>

#include "common/logging.hpp"

namespace rdmactor::test {

/// Records every line written to `log()` while attached.
class log_lines : public spdlog::sinks::base_sink<std::mutex> {
public:
  /// Lines at `level` or above that contain `part` (empty: any).
  size_t count(spdlog::level::level_enum level, const std::string& part = {}) {
    std::lock_guard<std::mutex> guard{this->mutex_};
    size_t n = 0;
    for (auto& [lvl, text] : lines_)
      if (lvl >= level && text.find(part) != std::string::npos)
        ++n;
    return n;
  }

  /// Every line at `level` or above, one per line (for failure messages).
  std::string dump(spdlog::level::level_enum level) {
    std::lock_guard<std::mutex> guard{this->mutex_};
    std::string out;
    for (auto& [lvl, text] : lines_)
      if (lvl >= level)
        out += text + "\n";
    return out;
  }

protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.emplace_back(msg.level,
                        std::string{msg.payload.data(), msg.payload.size()});
  }

  void flush_() override {
    // nothing buffered
  }

private:
  std::vector<std::pair<spdlog::level::level_enum, std::string>> lines_;
};

/// Attaches a `log_lines` to `log()` for its lifetime.  Attach before the
/// nodes of a test exist (the logger's sink list is not thread-safe).
struct log_capture {
  std::shared_ptr<log_lines> lines = std::make_shared<log_lines>();

  log_capture() {
    log().sinks().push_back(lines);
  }

  ~log_capture() {
    auto& sinks = log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), lines), sinks.end());
  }
};

} // namespace rdmactor::test
