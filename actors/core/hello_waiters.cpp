#include "actors/core/hello_waiters.hpp"

#include "rdmactor/error.hpp"

namespace rdmactor {

caf::error hello_waiters::offered(uint32_t extensions, uint32_t extension,
                                  const char* what, const std::string& peer) {
  if ((extensions & extension) == extension)
    return {};
  return make_error(errc::not_negotiated,
                    std::string{what} + ": the peer " + peer
                        + " did not offer it in its Hello (an older "
                          "rdmactor, or immediate-data=false there)");
}

void hello_waiters::add(uint32_t extension, const char* what,
                        time_point deadline, fn_type fn) {
  waiting_.push_back(waiter{extension, what, deadline, std::move(fn)});
}

void hello_waiters::run(uint32_t extensions, const std::string& peer) {
  // One at a time: a waiter's function may end the connection, and then
  // `fail_all` answers the rest with its error.
  while (!waiting_.empty()) {
    auto w = std::move(waiting_.front());
    waiting_.pop_front();
    w.fn(offered(extensions, w.extension, w.what, peer));
  }
}

void hello_waiters::expire(time_point now, const std::string& peer,
                           uint32_t timeout_ms) {
  while (!waiting_.empty() && waiting_.front().deadline <= now) {
    auto w = std::move(waiting_.front());
    waiting_.pop_front();
    w.fn(make_error(errc::request_timeout,
                    std::string{w.what} + ": no Hello from " + peer + " within "
                        + std::to_string(timeout_ms)
                        + " ms (request-timeout-ms)"));
  }
}

void hello_waiters::fail_all(const caf::error& err) {
  auto all = std::move(waiting_);
  waiting_.clear();
  for (auto& w : all)
    w.fn(err);
}

} // namespace rdmactor
