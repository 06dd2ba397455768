// The outbound half of a soft queue pair (transport/soft/outbound_stream.hpp):
// one sendmsg gathers every queued frame; partial writes, delay faults,
// byte-count drops and deregistered payloads stop the gather where they must.
#define BOOST_TEST_MODULE outbound_stream
#include <boost/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

#include "transport/soft/limits.hpp"
#include "transport/soft/outbound_stream.hpp"

using namespace rdmactor::transport::soft;
using namespace std::chrono_literals;

namespace {

/// A connected socket pair; `tx` writes, `rx` reads.
struct socket_pair {
  socket_pair() {
    int fds[2];
    BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    tx = fds[0];
    rx = fds[1];
  }
  ~socket_pair() {
    ::close(tx);
    ::close(rx);
  }
  socket_pair(const socket_pair&) = delete;
  socket_pair& operator=(const socket_pair&) = delete;

  /// Reads everything buffered now (non-blocking) and appends it to `out`.
  void drain(std::vector<uint8_t>& out) const {
    std::array<uint8_t, 64 * 1024> buf{};
    for (;;) {
      auto n = ::recv(rx, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n <= 0)
        return;
      out.insert(out.end(), buf.data(), buf.data() + n);
    }
  }

  int tx = -1;
  int rx = -1;
};

/// Registered memory holding `len` bytes 0, 1, 2, ... (mod 251).
struct memory {
  explicit memory(size_t len, uint32_t key = 1)
      : bytes(len),
        reg(std::make_shared<registration>(bytes.data(), len, 0, key, key)) {
    for (size_t i = 0; i < len; ++i)
      bytes[i] = static_cast<uint8_t>(i % 251);
  }

  /// A payload of `len` bytes from offset `off`.
  range_list range(size_t off, size_t len) {
    range_list r;
    r.items[0] = guarded_range{reg, bytes.data() + off, len};
    r.size = 1;
    return r;
  }

  std::vector<uint8_t> bytes;
  registration_ptr reg;
};

wire::header send_of(uint32_t len) {
  wire::header h;
  h.type = wire::frame_type::send;
  h.length = len;
  return h;
}

wire::header ack_of(uint32_t n) {
  wire::header h;
  h.type = wire::frame_type::ack;
  h.length = n;
  return h;
}

/// Splits a byte stream into frames: (header, payload offset) pairs;
/// fails the test on a header that does not decode or a cut frame.
std::vector<std::pair<wire::header, size_t>>
frames_in(const std::vector<uint8_t>& stream) {
  std::vector<std::pair<wire::header, size_t>> out;
  size_t at = 0;
  while (at < stream.size()) {
    BOOST_REQUIRE(stream.size() - at >= wire::header_size);
    wire::header h;
    BOOST_REQUIRE(wire::decode(stream.data() + at, h));
    at += wire::header_size;
    auto n = wire::payload_bytes(h);
    BOOST_REQUIRE(stream.size() - at >= n);
    out.emplace_back(h, at);
    at += n;
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_burst_of_frames_leaves_in_one_sendmsg) {
  socket_pair s;
  memory mem{4096};
  outbound_stream tx;
  auto now = clock_type::now();
  for (uint32_t i = 0; i < 16; ++i) {
    tx.push(send_of(100), mem.range(i * 100, 100), now);
    tx.push(ack_of(1), {}, now);
  }
  auto res = tx.pump(s.tx, now);
  BOOST_TEST((res.status == outbound_stream::pump_status::idle));
  BOOST_TEST(res.writes == 1u);
  BOOST_TEST(res.requests_written == 16u);
  BOOST_TEST(tx.empty());
  BOOST_TEST(tx.responses() == 0u);
  std::vector<uint8_t> stream;
  s.drain(stream);
  auto frames = frames_in(stream);
  BOOST_REQUIRE_EQUAL(frames.size(), 32u);
  for (uint32_t i = 0; i < 32; ++i) {
    BOOST_TEST(frames[i].first.seq == i);
    if (i % 2 == 1) {
      BOOST_TEST((frames[i].first.type == wire::frame_type::ack));
      continue;
    }
    BOOST_TEST((frames[i].first.type == wire::frame_type::send));
    BOOST_TEST(std::memcmp(stream.data() + frames[i].second,
                           mem.bytes.data() + (i / 2) * 100, 100)
               == 0);
  }
}

BOOST_AUTO_TEST_CASE(a_gather_stops_at_its_frame_limit) {
  socket_pair s;
  outbound_stream tx;
  auto now = clock_type::now();
  auto n = 2 * limits::gather_frames + 3;
  for (size_t i = 0; i < n; ++i)
    tx.push(ack_of(1), {}, now);
  auto res = tx.pump(s.tx, now);
  BOOST_TEST((res.status == outbound_stream::pump_status::idle));
  BOOST_TEST(res.writes == 3u);
  std::vector<uint8_t> stream;
  s.drain(stream);
  BOOST_TEST(frames_in(stream).size() == n);
}

BOOST_AUTO_TEST_CASE(a_full_socket_takes_part_and_the_rest_follows_whole) {
  socket_pair s;
  int small = 4096;
  BOOST_REQUIRE(::setsockopt(s.tx, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small))
                == 0);
  memory mem{64 * 1024};
  outbound_stream tx;
  auto now = clock_type::now();
  constexpr uint32_t count = 48;
  constexpr uint32_t len = 3000;
  for (uint32_t i = 0; i < count; ++i)
    tx.push(send_of(len), mem.range(i * 1000, len), now);
  std::vector<uint8_t> stream;
  size_t requests = 0;
  bool saw_blocked = false;
  for (int round = 0; round < 10000 && !tx.empty(); ++round) {
    auto res = tx.pump(s.tx, now);
    requests += res.requests_written;
    if (res.status == outbound_stream::pump_status::blocked) {
      saw_blocked = true;
      BOOST_TEST(tx.blocked());
    } else {
      BOOST_TEST((res.status == outbound_stream::pump_status::idle));
    }
    s.drain(stream);
  }
  BOOST_TEST(tx.empty());
  BOOST_TEST(saw_blocked); // the small buffer cut the batch somewhere
  BOOST_TEST(requests == count);
  auto frames = frames_in(stream);
  BOOST_REQUIRE_EQUAL(frames.size(), size_t{count});
  for (uint32_t i = 0; i < count; ++i) {
    BOOST_TEST(frames[i].first.seq == i);
    BOOST_TEST(std::memcmp(stream.data() + frames[i].second,
                           mem.bytes.data() + i * 1000, len)
               == 0);
  }
}

BOOST_AUTO_TEST_CASE(a_frame_held_back_by_a_delay_stops_the_gather) {
  socket_pair s;
  outbound_stream tx;
  fault_plan plan;
  plan.delay = 10ms;
  tx.set_faults(plan);
  auto t0 = clock_type::now();
  tx.push(ack_of(1), {}, t0);
  tx.push(ack_of(1), {}, t0);
  tx.push(ack_of(1), {}, t0 + 5ms);
  BOOST_TEST((tx.pump(s.tx, t0 + 1ms).status
              == outbound_stream::pump_status::delayed));
  auto res = tx.pump(s.tx, t0 + 10ms);
  BOOST_TEST((res.status == outbound_stream::pump_status::delayed));
  BOOST_TEST(res.writes == 1u);
  BOOST_TEST(res.bytes == 2 * wire::header_size);
  BOOST_TEST((tx.release_time() == t0 + 15ms));
  res = tx.pump(s.tx, t0 + 15ms);
  BOOST_TEST((res.status == outbound_stream::pump_status::idle));
  std::vector<uint8_t> stream;
  s.drain(stream);
  BOOST_TEST(frames_in(stream).size() == 3u);
}

BOOST_AUTO_TEST_CASE(a_drop_fault_cuts_the_batch_at_its_byte) {
  socket_pair s;
  outbound_stream tx;
  fault_plan plan;
  plan.drop_after_bytes = wire::header_size + 10;
  tx.set_faults(plan);
  auto now = clock_type::now();
  for (int i = 0; i < 4; ++i)
    tx.push(ack_of(1), {}, now);
  auto res = tx.pump(s.tx, now);
  BOOST_TEST((res.status == outbound_stream::pump_status::dropped));
  BOOST_TEST(res.bytes == wire::header_size + 10);
  std::vector<uint8_t> stream;
  s.drain(stream);
  BOOST_TEST(stream.size() == wire::header_size + 10);
}

BOOST_AUTO_TEST_CASE(frames_before_a_deregistered_payload_still_leave) {
  socket_pair s;
  memory good{1024, 1};
  memory gone{1024, 2};
  outbound_stream tx;
  auto now = clock_type::now();
  tx.push(send_of(64), good.range(0, 64), now);
  tx.push(send_of(64), good.range(64, 64), now);
  tx.push(send_of(64), gone.range(0, 64), now);
  tx.push(send_of(64), good.range(128, 64), now);
  {
    std::unique_lock<std::shared_mutex> lock{gone.reg->mtx};
    gone.reg->valid = false;
  }
  auto res = tx.pump(s.tx, now);
  BOOST_TEST((res.status == outbound_stream::pump_status::unregistered));
  BOOST_TEST(res.requests_written == 2u);
  std::vector<uint8_t> stream;
  s.drain(stream);
  auto frames = frames_in(stream);
  BOOST_REQUIRE_EQUAL(frames.size(), 2u);
  BOOST_TEST(
      std::memcmp(stream.data() + frames[1].second, good.bytes.data() + 64, 64)
      == 0);
}

BOOST_AUTO_TEST_CASE(payloads_over_more_registrations_than_one_lock_set) {
  // Each frame names a registration of its own: the gather stops when the
  // lock set is full and the next call takes the rest.
  socket_pair s;
  std::vector<std::unique_ptr<memory>> regions;
  outbound_stream tx;
  auto now = clock_type::now();
  constexpr size_t count = shared_touch::capacity + 8;
  for (size_t i = 0; i < count; ++i) {
    regions.push_back(
        std::make_unique<memory>(256, static_cast<uint32_t>(i + 1)));
    tx.push(send_of(16), regions.back()->range(i % 200, 16), now);
  }
  auto res = tx.pump(s.tx, now);
  BOOST_TEST((res.status == outbound_stream::pump_status::idle));
  BOOST_TEST(res.writes == 2u);
  BOOST_TEST(res.requests_written == count);
  std::vector<uint8_t> stream;
  s.drain(stream);
  BOOST_TEST(frames_in(stream).size() == count);
}
