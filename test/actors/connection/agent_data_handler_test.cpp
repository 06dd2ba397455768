#include <boost/test/unit_test.hpp>

// The suite `inline_handler`: the inline data handler
// (include/rdmactor/data_handler.hpp) between two harnessed agents:
// chunks reach it inside the agent's activation, its sends leave with the
// acknowledgements of what it read, and it is detached (and told why)
// when it is replaced, throws, or the connection ends.

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "test/support/agent_harness.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(inline_handler)

namespace {

/// Records what it is handed; keeps it, echoes it or throws once.  Runs
/// on the harness's one thread: no locks.
class recorder final : public data_handler {
public:
  enum class then { keep, echo, throw_once };

  explicit recorder(then what) : what_(what) {}

  void on_data(data_context& ctx, local_mr chunk) override {
    conn = ctx.connection();
    if (what_ == then::throw_once && !thrown_) {
      thrown_ = true;
      throw std::runtime_error("a test handler's failure");
    }
    if (what_ == then::keep) {
      chunks.push_back(std::move(chunk));
      return;
    }
    ++echoed;
    ctx.send_data(std::move(chunk), [this](caf::expected<uint64_t> r) {
      if (r)
        ++acked;
    });
  }

  void on_detach(const caf::error& why) override {
    ++detaches;
    reason = why;
    chunks.clear(); // the receive buffers go back
  }

  std::vector<std::string> kept_text() const {
    std::vector<std::string> out;
    for (auto& c : chunks)
      out.emplace_back(reinterpret_cast<const char*>(c.data()), c.size());
    return out;
  }

  std::vector<local_mr> chunks;
  size_t echoed = 0;
  size_t acked = 0;
  int detaches = 0;
  caf::error reason;
  uint64_t conn = 0;

private:
  then what_;
  bool thrown_ = false;
};

void send_text(agent_harness& h, const std::string& text) {
  auto sent = h.call<uint64_t>(h.client_conn, send_data_atom::value, text);
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  BOOST_REQUIRE_EQUAL(*sent, text.size());
}

std::string text_of(const local_mr& mr) {
  return {reinterpret_cast<const char*>(mr.data()), mr.size()};
}

uint64_t subscribe(agent_harness& h, data_handler_ptr handler) {
  auto n = h.call<uint64_t>(h.server_conn, subscribe_data_atom::value,
                            std::move(handler));
  BOOST_REQUIRE_MESSAGE(n, render(n));
  return *n;
}

} // namespace

// The echo runs in the server agent's activation that read the ping, so the
// acknowledgement of every ping rides on its echo: no SendDataResponse of
// its own, and both sides' send_data complete.
BOOST_AUTO_TEST_CASE(a_handler_echoes_with_the_acknowledgement_of_each_ping) {
  agent_harness h;
  auto echo = std::make_shared<recorder>(recorder::then::echo);
  BOOST_TEST(subscribe(h, echo) == 0u);
  auto sub = h.collector();
  BOOST_REQUIRE(
      h.call<uint64_t>(h.client_conn, subscribe_data_atom::value, sub.hdl));
  constexpr int rounds = 50;
  for (int i = 0; i < rounds; ++i) {
    auto text = "ping " + std::to_string(i);
    send_text(h, text);
    BOOST_REQUIRE_EQUAL(sub.chunks->size(), 1u);
    BOOST_REQUIRE_EQUAL(text_of(sub.chunks->front()), text);
    sub.chunks->clear();
  }
  BOOST_TEST(echo->echoed == size_t{rounds});
  BOOST_TEST(echo->acked == size_t{rounds});
  auto server = h.stats(h.server_conn);
  auto client = h.stats(h.client_conn);
  BOOST_TEST(server.piggybacked_acks_sent == uint64_t{rounds});
  BOOST_TEST(client.piggybacked_acks_received == uint64_t{rounds});
  BOOST_TEST(server.protocol_errors == 0u);
  BOOST_TEST(echo->conn == h.server_conn->id());
  BOOST_TEST(echo->detaches == 0);
}

/// Answers a chunk with each of its bytes as a chunk of its own, all sent
/// from inside the activation that read it.
class burster final : public data_handler {
public:
  void on_data(data_context& ctx, local_mr chunk) override {
    for (size_t i = 0; i < chunk.size(); ++i) {
      auto byte = chunk.slice(i, 1);
      if (!byte)
        return;
      ctx.send_data(std::move(*byte), [this](caf::expected<uint64_t> r) {
        if (r)
          ++acked;
      });
    }
  }

  size_t acked = 0;
};

// A burst of small sends from one activation leaves packed (several frames
// to one message, EXT_PACKED_FRAMES, which both agents offer) and arrives
// whole and in order.
BOOST_AUTO_TEST_CASE(a_burst_of_small_sends_goes_packed_and_in_order) {
  agent_harness h;
  auto burst = std::make_shared<burster>();
  subscribe(h, burst);
  auto sub = h.collector();
  BOOST_REQUIRE(
      h.call<uint64_t>(h.client_conn, subscribe_data_atom::value, sub.hdl));
  const std::string text = "0123456789";
  send_text(h, text);
  BOOST_REQUIRE_EQUAL(sub.chunks->size(), text.size());
  for (size_t i = 0; i < text.size(); ++i)
    BOOST_TEST(text_of((*sub.chunks)[i]) == text.substr(i, 1));
  BOOST_TEST(burst->acked == text.size());
  auto server = h.stats(h.server_conn);
  BOOST_TEST(server.packed_messages_sent >= 1u);
  BOOST_TEST(server.packed_frames_sent >= text.size());
  BOOST_TEST(server.packed_messages_sent < server.packed_frames_sent);
  BOOST_TEST(server.protocol_errors == 0u);
  BOOST_TEST(h.stats(h.client_conn).protocol_errors == 0u);
}

// Queued chunks are handed over when it is set; receive_data is refused
// while it is; a null handler ends it (on_detach with no error) and data
// queues for receive_data again.
BOOST_AUTO_TEST_CASE(a_handler_takes_the_queue_and_a_null_one_ends_it) {
  agent_harness h;
  send_text(h, "one");
  send_text(h, "two");
  auto keep = std::make_shared<recorder>(recorder::then::keep);
  BOOST_TEST(subscribe(h, keep) == 2u);
  send_text(h, "three");
  BOOST_TEST(keep->kept_text()
             == (std::vector<std::string>{"one", "two", "three"}));
  auto r = h.call<local_mr>(h.server_conn, receive_data_atom::value);
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::invalid_argument, render(r.error()));
  BOOST_TEST(subscribe(h, data_handler_ptr{}) == 0u);
  BOOST_TEST(keep->detaches == 1);
  BOOST_TEST(!keep->reason, render(keep->reason));
  send_text(h, "four");
  auto got = h.call<local_mr>(h.server_conn, receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(got, render(got));
  BOOST_TEST(text_of(*got) == "four");
  BOOST_TEST(keep->chunks.empty()); // dropped at detach
}

// An exception from on_data detaches the handler with handler_failed; the
// connection keeps serving and later data queues for receive_data.
BOOST_AUTO_TEST_CASE(a_throwing_handler_is_detached_and_data_queues_again) {
  agent_harness h;
  auto bad = std::make_shared<recorder>(recorder::then::throw_once);
  subscribe(h, bad);
  send_text(h, "thrown on");
  BOOST_REQUIRE_EQUAL(bad->detaches, 1);
  BOOST_TEST(code_of(bad->reason) == errc::handler_failed, render(bad->reason));
  BOOST_TEST(render(bad->reason).find("a test handler's failure")
             != std::string::npos);
  send_text(h, "after");
  auto got = h.call<local_mr>(h.server_conn, receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(got, render(got));
  BOOST_TEST(text_of(*got) == "after");
}

// The connection's end detaches the handler with the end reason; what it
// held goes back, and every byte allocated returns to both allocators.
BOOST_AUTO_TEST_CASE(the_connections_end_detaches_the_handler) {
  agent_harness h;
  const auto server_start = h.server.bytes_in_use();
  const auto client_start = h.client.bytes_in_use();
  auto keep = std::make_shared<recorder>(recorder::then::keep);
  subscribe(h, keep);
  for (int i = 0; i < 3; ++i)
    send_text(h, std::string(1000, static_cast<char>('a' + i)));
  BOOST_REQUIRE_EQUAL(keep->chunks.size(), 3u);
  auto down = h.watch(h.server_conn);
  caf::anon_send_exit(h.client_conn, caf::exit_reason::user_shutdown);
  h.settle();
  BOOST_REQUIRE(down->down);
  BOOST_TEST(keep->detaches == 1);
  BOOST_TEST(code_of(keep->reason) == errc::peer_closed, render(keep->reason));
  BOOST_TEST(keep->chunks.empty());
  BOOST_TEST(h.server.bytes_in_use() == server_start);
  BOOST_TEST(h.client.bytes_in_use() == client_start);
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
      mismatch = r ? caf::error{} : r.error();
      mismatch_seen = true;
    });
    ctx.write(src_, remote_, [this, &ctx](caf::expected<uint64_t> w) {
      written = w ? *w : 0;
      ctx.read(dst_, remote_,
               [this](caf::expected<uint64_t> r) { read = r ? *r : 0; });
    });
  }

  void on_data(data_context&, local_mr) override {}

  uint64_t written = 0;
  uint64_t read = 0;
  bool mismatch_seen = false;
  caf::error mismatch;

private:
  local_mr src_;
  local_mr dst_;
  remote_mr remote_;
};

// One-sided operations from a handler: a WRITE, and from its callback a
// READ of what it wrote, without a message per operation; checks fail at
// once with the error a request would get.
BOOST_AUTO_TEST_CASE(a_handler_writes_and_reads_back_from_its_callbacks) {
  agent_harness h;
  const uint64_t size = 256;
  auto remote = h.call<remote_mr>(h.client_conn, request_remote_mr_atom::value,
                                  size, uint64_t{64});
  BOOST_REQUIRE_MESSAGE(remote, render(remote));
  auto src = h.alloc(h.client_conn, size);
  auto dst = h.alloc(h.client_conn, size);
  for (uint64_t i = 0; i < size; ++i)
    src.data()[i] = static_cast<uint8_t>(i * 7 + 3);
  std::memset(dst.data(), 0, size);
  auto handler = std::make_shared<write_then_read>(src, dst, *remote);
  auto reply = h.ask<uint64_t>(h.client_conn, subscribe_data_atom::value,
                               data_handler_ptr{handler});
  // At once, inside on_attach.
  BOOST_TEST(handler->mismatch_seen);
  BOOST_TEST(code_of(handler->mismatch) == errc::length_mismatch,
             render(handler->mismatch));
  h.settle();
  auto n = agent_harness::take(*reply);
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_TEST(handler->written == size);
  BOOST_TEST(handler->read == size);
  BOOST_TEST(std::memcmp(src.data(), dst.data(), size) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
