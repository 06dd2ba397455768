#include "common/rate_limiter.hpp"

#include "common/logging.hpp"

#include <map>
#include <memory>

#include "common/tuning.hpp"

namespace rdmactor {

rate_limiter::rate_limiter(uint64_t max_events,
                           std::chrono::milliseconds window)
    : max_events_(max_events), window_(window) {}

rate_limiter::verdict rate_limiter::take(time_point now) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!started_ || now - window_start_ >= window_) {
    started_ = true;
    window_start_ = now;
    used_ = 0;
  }
  if (used_ >= max_events_) {
    ++denied_;
    return {};
  }
  ++used_;
  verdict result{true, denied_};
  denied_ = 0;
  return result;
}

void rate_limiter::add_denied(uint64_t n) {
  std::lock_guard<std::mutex> guard{mtx_};
  denied_ += n;
}

uint64_t rate_limiter::take_denied() {
  std::lock_guard<std::mutex> guard{mtx_};
  auto result = denied_;
  denied_ = 0;
  return result;
}

uint64_t rate_limiter::used() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return used_;
}

void rate_limiter::reset(uint64_t max_events,
                         std::chrono::milliseconds window) {
  std::lock_guard<std::mutex> guard{mtx_};
  max_events_ = max_events;
  window_ = window;
  started_ = false;
  used_ = 0;
  denied_ = 0;
}

rate_limiter& shared_log_budget(const std::string& name) {
  static std::mutex mtx;
  static std::map<std::string, std::unique_ptr<rate_limiter>> budgets;
  std::lock_guard<std::mutex> guard{mtx};
  auto& slot = budgets[name];
  if (!slot)
    slot = std::make_unique<rate_limiter>(
        tuning::shared_log_lines,
        std::chrono::milliseconds{tuning::shared_log_window_ms});
  return *slot;
}

std::string suppressed_note(uint64_t n) {
  if (n == 0)
    return {};
  return " (" + std::to_string(n) + " similar line" + (n == 1 ? "" : "s")
         + " suppressed)";
}

bool log_within(const std::string& budget, spdlog::level::level_enum level,
                const std::string& line) {
  if (!log().should_log(level))
    return false; // filtered anyway: spends no budget
  auto v = shared_log_budget(budget).take(rate_limiter::clock_type::now());
  if (v)
    log().log(level, "{}{}", line, suppressed_note(v.denied_before));
  return v.admitted;
}

bool warn_within(const std::string& budget, const std::string& line) {
  return log_within(budget, spdlog::level::warn, line);
}

} // namespace rdmactor
