// The inline data handler (include/rdmactor/data_handler.hpp) on the soft
// fabric: chunks reach it inside the agent's activation, its sends leave
// with the acknowledgements of what it read, and it is detached (and told
// why) when it is replaced, throws, or the connection ends.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "test/actors/fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

/// Reads `x` under `mtx` (the tests' handlers run on the agents' workers).
template <class T>
T locked(std::mutex& mtx, const T& x) {
  std::lock_guard<std::mutex> guard{mtx};
  return x;
}

/// Records what it is handed; optionally echoes or throws.
class recording_handler final : public data_handler {
public:
  enum class then { keep, echo, throw_once };

  explicit recording_handler(then what) : what_(what) {}

  void on_data(data_context& ctx, local_mr chunk) override {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      conn_ = ctx.connection();
      if (what_ == then::throw_once && !thrown_) {
        thrown_ = true;
        throw std::runtime_error("a test handler's failure");
      }
      if (what_ == then::keep) {
        chunks_.push_back(std::move(chunk));
        return;
      }
      ++echoed_;
    }
    ctx.send_data(std::move(chunk), [this](caf::expected<uint64_t> r) {
      std::lock_guard<std::mutex> guard{mtx_};
      if (r)
        ++acked_;
    });
  }

  void on_detach(const caf::error& reason) override {
    std::lock_guard<std::mutex> guard{mtx_};
    ++detaches_;
    reason_ = reason;
    chunks_.clear(); // the receive buffers go back
  }

  size_t kept() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return chunks_.size();
  }

  std::vector<std::string> kept_text() const {
    std::lock_guard<std::mutex> guard{mtx_};
    std::vector<std::string> out;
    for (auto& c : chunks_)
      out.emplace_back(reinterpret_cast<const char*>(c.data()), c.size());
    return out;
  }

  size_t echoed() const {
    return locked(mtx_, echoed_);
  }

  size_t acked() const {
    return locked(mtx_, acked_);
  }

  int detaches() const {
    return locked(mtx_, detaches_);
  }

  caf::error reason() const {
    return locked(mtx_, reason_);
  }

  uint64_t conn() const {
    return locked(mtx_, conn_);
  }

private:
  then what_;
  mutable std::mutex mtx_;
  std::vector<local_mr> chunks_;
  size_t echoed_ = 0;
  size_t acked_ = 0;
  int detaches_ = 0;
  bool thrown_ = false;
  caf::error reason_;
  uint64_t conn_ = 0;
};

std::chrono::seconds patience() {
  return std::chrono::seconds(10 * timeout_scale());
}

void send_text(two_nodes& t, const std::string& text) {
  auto sent = call<uint64_t>(t.sys, t.client_conn, send_data_atom::value, text);
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  BOOST_REQUIRE_EQUAL(*sent, text.size());
}

std::string text_of(const local_mr& mr) {
  return {reinterpret_cast<const char*>(mr.data()), mr.size()};
}

uint64_t subscribe(two_nodes& t, data_handler_ptr h) {
  auto n = call<uint64_t>(t.sys, t.server_conn, subscribe_data_atom::value,
                          std::move(h));
  BOOST_REQUIRE_MESSAGE(n, render(n));
  return *n;
}

} // namespace

BOOST_AUTO_TEST_SUITE(data_handler)

// A data_subscriber replaces a handler (which hears of it) and takes the
// data from then on.
BOOST_AUTO_TEST_CASE(a_subscriber_replaces_a_handler) {
  two_nodes t;
  auto keep
      = std::make_shared<recording_handler>(recording_handler::then::keep);
  subscribe(t, keep);
  caf::scoped_actor sub{t.sys};
  BOOST_REQUIRE(call<uint64_t>(t.sys, t.server_conn, subscribe_data_atom::value,
                               caf::actor_cast<data_subscriber>(sub)));
  BOOST_TEST(keep->detaches() == 1);
  send_text(t, "to the subscriber");
  std::string got;
  sub->receive([&](data_atom, local_mr& mr) { got = text_of(mr); },
               caf::after(patience()) >> [] { BOOST_FAIL("nothing pushed"); });
  BOOST_TEST(got == "to the subscriber");
  BOOST_TEST(keep->kept() == 0u);
}

// A null handler ends any subscription, a subscriber actor's too: data
// queues for receive_data again.
BOOST_AUTO_TEST_CASE(a_null_handler_ends_a_subscribers_subscription) {
  two_nodes t;
  caf::scoped_actor sub{t.sys};
  BOOST_REQUIRE(call<uint64_t>(t.sys, t.server_conn, subscribe_data_atom::value,
                               caf::actor_cast<data_subscriber>(sub)));
  BOOST_TEST(subscribe(t, data_handler_ptr{}) == 0u);
  send_text(t, "queued");
  auto got = call<local_mr>(t.sys, t.server_conn, receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(got, render(got));
  BOOST_TEST(text_of(*got) == "queued");
}

BOOST_AUTO_TEST_CASE(make_data_handler_wraps_a_function) {
  two_nodes t;
  auto seen = std::make_shared<std::atomic<int>>(0);
  subscribe(t, make_data_handler([seen](data_context& ctx, local_mr chunk) {
              ++*seen;
              ctx.send_data(std::move(chunk));
            }));
  caf::scoped_actor sub{t.sys};
  BOOST_REQUIRE(call<uint64_t>(t.sys, t.client_conn, subscribe_data_atom::value,
                               caf::actor_cast<data_subscriber>(sub)));
  send_text(t, "back");
  std::string got;
  sub->receive([&](data_atom, local_mr& mr) { got = text_of(mr); },
               caf::after(patience()) >> [] { BOOST_FAIL("no echo"); });
  BOOST_TEST(got == "back");
  BOOST_TEST(seen->load() == 1);
}

BOOST_AUTO_TEST_SUITE_END()
