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

/// Writes `src` into the peer's `remote` when attached, reads it back
/// into `dst` from the write's callback, and records both results; a
/// READ of the wrong length fails before anything is posted.
class write_then_read final : public data_handler {
public:
  write_then_read(local_mr src, local_mr dst, remote_mr remote)
      : src_(std::move(src)), dst_(std::move(dst)), remote_(std::move(remote)) {
  }

  void on_attach(data_context& ctx) override {
    local_mr short_dst = *dst_.slice(0, dst_.size() - 1);
    ctx.read(short_dst, remote_, [this](caf::expected<uint64_t> r) {
      std::lock_guard<std::mutex> guard{mtx_};
      mismatch_ = r ? caf::error{} : r.error();
      mismatch_seen_ = true;
    });
    ctx.write(src_, remote_, [this, &ctx](caf::expected<uint64_t> w) {
      {
        std::lock_guard<std::mutex> guard{mtx_};
        written_ = w ? *w : 0;
      }
      ctx.read(dst_, remote_, [this](caf::expected<uint64_t> r) {
        std::lock_guard<std::mutex> guard{mtx_};
        read_ = r ? *r : 0;
      });
    });
  }

  void on_data(data_context&, local_mr) override {}

  uint64_t written() const {
    return locked(mtx_, written_);
  }

  uint64_t read_bytes() const {
    return locked(mtx_, read_);
  }

  bool mismatch_seen() const {
    return locked(mtx_, mismatch_seen_);
  }

  caf::error mismatch() const {
    return locked(mtx_, mismatch_);
  }

private:
  local_mr src_;
  local_mr dst_;
  remote_mr remote_;
  mutable std::mutex mtx_;
  uint64_t written_ = 0;
  uint64_t read_ = 0;
  bool mismatch_seen_ = false;
  caf::error mismatch_;
};

// One-sided operations from a handler: a WRITE, and from its callback a
// READ of what it wrote, without a message per operation; checks fail at
// once with the error a request would get.
BOOST_AUTO_TEST_CASE(a_handler_writes_and_reads_back_from_its_callbacks) {
  two_nodes t;
  const uint64_t size = 256;
  auto remote = call<remote_mr>(
      t.sys, t.client_conn, request_remote_mr_atom::value, size, uint64_t{64});
  BOOST_REQUIRE_MESSAGE(remote, render(remote));
  auto alloc = [&] {
    auto mr = call<local_mr>(t.sys, t.client_conn, alloc_local_mr_atom::value,
                             size, uint64_t{64});
    BOOST_REQUIRE_MESSAGE(mr, render(mr));
    return *mr;
  };
  auto src = alloc();
  auto dst = alloc();
  for (uint64_t i = 0; i < size; ++i)
    src.data()[i] = static_cast<uint8_t>(i * 7 + 3);
  std::memset(dst.data(), 0, size);
  auto h = std::make_shared<write_then_read>(src, dst, *remote);
  auto n = call<uint64_t>(t.sys, t.client_conn, subscribe_data_atom::value,
                          data_handler_ptr{h});
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_TEST(h->mismatch_seen()); // at once, inside on_attach
  BOOST_TEST(code_of(h->mismatch()) == errc::length_mismatch,
             render(h->mismatch()));
  BOOST_REQUIRE(
      eventually([&] { return h->read_bytes() == size; }, patience()));
  BOOST_TEST(h->written() == size);
  BOOST_TEST(std::memcmp(src.data(), dst.data(), size) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
