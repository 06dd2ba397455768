// Soft-fabric-only tests: hostile frames on an established connection,
// coalesced acknowledgements and atomic frames from a raw peer.

#include <boost/test/unit_test.hpp>

#include <vector>

#include "test/transport/soft_fabric_fixture.hpp"
#include "transport/soft/outbound_stream.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

// -- hostile frames on an established connection -----------------------------

BOOST_AUTO_TEST_SUITE(hostile_peer)

namespace {

/// A raw peer that completed the handshake, and the server-side QP with
/// one posted receive.
struct raw_session {
  transport::device_ptr dev;
  std::unique_ptr<transport::listener> lst;
  std::unique_ptr<raw_socket> raw;
  transport::queue_pair_ptr qp;
  reg_buffer inbox;
  reg_buffer mem;

  raw_session() {
    dev = open_soft(soft_options());
    lst = value_or_throw(dev->listen("127.0.0.1", 0, {}), "listen");
    qp = accept_while(*lst, [&] {
      raw = raw_socket::connect(lst->port());
      if (!raw->handshake(default_hello()))
        throw std::runtime_error("raw handshake failed");
    });
    inbox = make_buffer(*dev, 256, local_write);
    mem = make_buffer(*dev, 4096, local_write | remote_write | remote_read,
                      0x5C);
    auto sg = inbox.whole();
    if (qp->post_recv(1, &sg, 1))
      throw std::runtime_error("post_recv failed");
  }

  /// Expects the QP to fail, flush its receive and close the socket.
  void expect_violation() {
    auto wcs = wait_completions(*qp, 1, 5s);
    BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
    BOOST_TEST(wcs[0].status == wc_status::work_request_flushed);
    BOOST_TEST(qp->in_error());
    BOOST_TEST(raw->wait_closed(3s));
    BOOST_TEST(all_bytes(mem.data(), 4096, 0x5C));
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(oversized_send_length) {
  raw_session s;
  wire::header h;
  h.type = wire::frame_type::send;
  h.length = 0xFFFFFFF0u;
  s.raw->send_frame(h);
  s.expect_violation();
}

BOOST_AUTO_TEST_CASE(send_just_above_the_negotiated_maximum) {
  raw_session s;
  wire::header h;
  h.type = wire::frame_type::send;
  h.length = 64 * 1024 + 1;
  s.raw->send_frame(h);
  s.expect_violation();
}

BOOST_AUTO_TEST_CASE(damaged_header) {
  raw_session s;
  std::array<uint8_t, wire::header_size> buf{};
  wire::header h;
  h.type = wire::frame_type::send;
  h.length = 10;
  wire::encode(h, buf.data());
  buf[9] ^= 1; // length changed after the check word was computed
  s.raw->write_all(buf.data(), buf.size());
  s.expect_violation();
}

BOOST_AUTO_TEST_CASE(random_bytes_after_the_handshake) {
  raw_session s;
  std::vector<uint8_t> junk(1000);
  fill_pattern(junk.data(), junk.size(), 17);
  s.raw->write_all(junk.data(), junk.size());
  s.expect_violation();
}

BOOST_AUTO_TEST_CASE(response_without_a_request) {
  raw_session s;
  wire::header h;
  h.type = wire::frame_type::ack;
  s.raw->send_frame(h);
  s.expect_violation();
}

BOOST_AUTO_TEST_CASE(read_response_without_a_read) {
  raw_session s;
  wire::header h;
  h.type = wire::frame_type::read_response;
  h.length = 100000;
  s.raw->send_frame(h);
  s.expect_violation();
}

BOOST_AUTO_TEST_CASE(wrong_sequence_number) {
  raw_session s;
  wire::header h;
  h.type = wire::frame_type::send;
  h.length = 4;
  h.seq = 5;
  uint32_t x = 1;
  s.raw->send_frame(h, &x, 4);
  s.expect_violation();
}

BOOST_AUTO_TEST_CASE(truncated_frame_then_close) {
  raw_session s;
  wire::header h;
  h.type = wire::frame_type::send;
  h.length = 200;
  std::array<uint8_t, 50> part{};
  s.raw->send_frame(h, part.data(), part.size());
  ::shutdown(s.raw->fd, SHUT_WR);
  auto wcs = wait_completions(*s.qp, 1, 5s);
  BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
  BOOST_TEST(wcs[0].status == wc_status::work_request_flushed);
}

BOOST_AUTO_TEST_CASE(valid_frames_get_valid_answers) {
  raw_session s;
  // SEND into the posted receive: ACK.
  wire::header h;
  h.type = wire::frame_type::send;
  h.length = 5;
  h.has_imm = true;
  h.imm = 9;
  s.raw->send_frame(h, "hello", 5);
  auto ack = s.raw->read_header();
  BOOST_REQUIRE(ack);
  BOOST_TEST((ack->type == wire::frame_type::ack));
  BOOST_TEST(ack->seq == 0u);
  auto wcs = wait_completions(*s.qp, 1);
  BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
  BOOST_TEST(wcs[0].byte_len == 5u);
  BOOST_TEST(wcs[0].imm_data == 9u);
  BOOST_TEST(std::memcmp(s.inbox.data(), "hello", 5) == 0);
  // READ: the bytes come back.
  wire::header rd;
  rd.type = wire::frame_type::read;
  rd.seq = 1;
  rd.length = 16;
  rd.addr = s.mem.addr(8);
  rd.rkey = s.mem.mr->rkey();
  s.raw->send_frame(rd);
  auto resp = s.raw->read_header();
  BOOST_REQUIRE(resp);
  BOOST_TEST((resp->type == wire::frame_type::read_response));
  BOOST_TEST(resp->length == 16u);
  std::array<uint8_t, 16> bytes{};
  BOOST_REQUIRE(s.raw->read_exact(bytes.data(), 16, 2s));
  BOOST_TEST(all_bytes(bytes.data(), 16, 0x5C));
  // WRITE with a bad rkey: NAK remote_access_error, then the end.
  wire::header wr;
  wr.type = wire::frame_type::write;
  wr.seq = 2;
  wr.length = 8;
  wr.addr = s.mem.addr();
  wr.rkey = s.mem.mr->rkey() + 1;
  s.raw->send_frame(wr, "12345678", 8);
  auto nak = s.raw->read_header();
  BOOST_REQUIRE(nak);
  BOOST_TEST((nak->type == wire::frame_type::nak));
  BOOST_TEST(nak->status == wc_status::remote_access_error);
  BOOST_TEST(s.raw->wait_closed(3s));
  BOOST_TEST(all_bytes(s.mem.data(), 4096, 0x5C));
  BOOST_TEST(wait_error(*s.qp));
}

BOOST_AUTO_TEST_CASE(peer_that_never_reads_cannot_block_destruction) {
  raw_session s;
  auto big = make_buffer(*s.dev, 60 * 1024, 0);
  auto sg = big.whole();
  // Fill the socket buffers: the raw peer never reads.
  for (uint64_t i = 0; i < 400; ++i)
    BOOST_REQUIRE(!s.qp->post_send(i, &sg, 1, std::nullopt, false));
  auto start = std::chrono::steady_clock::now();
  s.qp.reset();
  // Bounded by limits::linger_ms (1 s), with room for a busy machine.
  BOOST_TEST(ms_since(start) < 10000);
}

// -- coalesced acknowledgements (wire version 2) --

namespace {

/// Appends the encoded frame `h` and its payload to `out`.
void append_frame(std::vector<uint8_t>& out, const wire::header& h,
                  const void* payload = nullptr, size_t len = 0) {
  auto at = out.size();
  out.resize(at + wire::header_size);
  wire::encode(h, out.data() + at);
  auto* p = static_cast<const uint8_t*>(payload);
  out.insert(out.end(), p, p + len);
}

wire::header send_header(uint32_t seq, uint32_t len, uint8_t acks = 0) {
  wire::header h;
  h.type = wire::frame_type::send;
  h.seq = seq;
  h.length = len;
  h.acks = acks;
  return h;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_lone_send_is_acknowledged_after_the_ack_delay) {
  raw_session s;
  s.raw->send_frame(send_header(0, 3), "abc", 3);
  auto ack = s.raw->read_header();
  BOOST_REQUIRE(ack);
  BOOST_TEST((ack->type == wire::frame_type::ack));
  BOOST_TEST(ack->length == 1u);
  BOOST_TEST(ack->seq == 0u);
  auto wcs = wait_completions(*s.qp, 1);
  BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
  BOOST_TEST(wcs[0].status == wc_status::success);
}

BOOST_AUTO_TEST_CASE(acks_owed_ride_ahead_of_a_read_response) {
  raw_session s;
  // A SEND and a READ in one write: the SEND's ACK is owed when the READ
  // executes, so the READ response carries it.
  std::vector<uint8_t> bytes;
  append_frame(bytes, send_header(0, 3), "abc", 3);
  wire::header rd;
  rd.type = wire::frame_type::read;
  rd.seq = 1;
  rd.length = 8;
  rd.addr = s.mem.addr();
  rd.rkey = s.mem.mr->rkey();
  append_frame(bytes, rd);
  s.raw->write_all(bytes.data(), bytes.size());
  auto resp = s.raw->read_header();
  BOOST_REQUIRE(resp);
  BOOST_TEST((resp->type == wire::frame_type::read_response));
  BOOST_TEST(resp->acks == 1u);
  BOOST_TEST(resp->seq == 0u);
}

BOOST_AUTO_TEST_CASE(a_quarter_of_the_receive_depth_is_acknowledged_at_once) {
  raw_session s;
  // recv_depth 16: at most 4 ACKs are held back.  Four SENDs in one write
  // get one ACK of 4 (at the latest after the ack delay: the same frame).
  for (uint64_t i = 2; i <= 4; ++i) {
    auto sg = s.inbox.whole();
    BOOST_REQUIRE(!s.qp->post_recv(i, &sg, 1));
  }
  std::vector<uint8_t> bytes;
  for (uint32_t i = 0; i < 4; ++i)
    append_frame(bytes, send_header(i, 2), "hi", 2);
  s.raw->write_all(bytes.data(), bytes.size());
  uint32_t acked = 0;
  while (acked < 4) {
    auto ack = s.raw->read_header();
    BOOST_REQUIRE(ack);
    BOOST_REQUIRE((ack->type == wire::frame_type::ack));
    acked += ack->length;
  }
  BOOST_TEST(acked == 4u);
  BOOST_TEST(wait_completions(*s.qp, 4).size() == 4u);
}

BOOST_AUTO_TEST_CASE(acks_a_request_carries_complete_our_sends) {
  raw_session s;
  auto sg = s.mem.sge_of(0, 16);
  BOOST_REQUIRE(!s.qp->post_send(7, &sg, 1));
  BOOST_REQUIRE(!s.qp->post_send(8, &sg, 1));
  for (int i = 0; i < 2; ++i) {
    auto h = s.raw->read_header();
    BOOST_REQUIRE(h);
    BOOST_REQUIRE((h->type == wire::frame_type::send));
    std::array<uint8_t, 16> payload{};
    BOOST_REQUIRE(s.raw->read_exact(payload.data(), payload.size(), 5s));
  }
  // Our reply SEND acknowledges both of the QP's SENDs.
  s.raw->send_frame(send_header(0, 2, 2), "ok", 2);
  auto wcs = wait_completions(*s.qp, 3);
  BOOST_REQUIRE_EQUAL(wcs.size(), 3u);
  // The ACKs count before the SEND that carries them.
  BOOST_TEST(wcs[0].wr_id == 7u);
  BOOST_TEST(wcs[1].wr_id == 8u);
  BOOST_TEST(wcs[2].wr_id == 1u);
  for (auto& wc : wcs)
    BOOST_TEST(wc.status == wc_status::success);
  BOOST_TEST(!s.qp->in_error());
}

BOOST_AUTO_TEST_CASE(more_acks_than_requests_outstanding) {
  raw_session s;
  auto sg = s.mem.sge_of(0, 16);
  BOOST_REQUIRE(!s.qp->post_send(7, &sg, 1));
  wire::header ack;
  ack.type = wire::frame_type::ack;
  ack.length = 2;
  s.raw->send_frame(ack);
  auto wcs = wait_completions(*s.qp, 2, 5s);
  BOOST_REQUIRE_EQUAL(wcs.size(), 2u);
  BOOST_TEST(count_status(wcs, wc_status::work_request_flushed) >= 1u);
  BOOST_TEST(s.qp->in_error());
  BOOST_TEST(s.raw->wait_closed(3s));
}

BOOST_AUTO_TEST_CASE(a_request_carrying_acks_for_nothing) {
  raw_session s;
  s.raw->send_frame(send_header(0, 2, 1), "hi", 2);
  s.expect_violation();
}

BOOST_AUTO_TEST_CASE(close_keeps_the_acks_of_a_dropped_request) {
  raw_session s;
  // Our frames are held back (delay fault), so the SEND that carries the
  // owed ACK (or, if the ack delay ran out first, the ACK itself) is still
  // queued when we close: the SEND is dropped, the ACK is not.
  // `abort_turns_a_dropped_request_into_its_acks` checks the first case
  // without timing.
  transport::soft::fault_plan plan;
  plan.delay = 300ms;
  BOOST_REQUIRE(!transport::soft::set_faults(*s.qp, plan));
  s.raw->send_frame(send_header(0, 3), "abc", 3);
  BOOST_REQUIRE_EQUAL(wait_completions(*s.qp, 1).size(), 1u);
  auto sg = s.mem.sge_of(0, 16);
  BOOST_REQUIRE(!s.qp->post_send(7, &sg, 1));
  s.qp->close();
  uint32_t acked = 0;
  while (auto h = s.raw->read_header(3s)) {
    BOOST_TEST((h->type == wire::frame_type::ack));
    acked += h->length;
  }
  BOOST_TEST(acked == 1u);
}

BOOST_AUTO_TEST_CASE(abort_turns_a_dropped_request_into_its_acks) {
  int fds[2];
  BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  transport::soft::outbound_stream tx;
  auto now = transport::soft::clock_type::now();
  wire::header ack;
  ack.type = wire::frame_type::ack;
  ack.length = 1;
  tx.push(ack, {}, now);
  tx.push(send_header(0, 0, 2), {}, now);
  wire::header rd;
  rd.type = wire::frame_type::read;
  tx.push(rd, {}, now);
  BOOST_TEST(tx.abort(true));
  BOOST_TEST(tx.responses() == 2u);
  BOOST_TEST((tx.pump(fds[0], now).status
              == transport::soft::outbound_stream::pump_status::idle));
  std::array<uint8_t, 3 * wire::header_size> bytes{};
  auto n = ::recv(fds[1], bytes.data(), bytes.size(), MSG_DONTWAIT);
  BOOST_REQUIRE_EQUAL(n, static_cast<ssize_t>(2 * wire::header_size));
  wire::header first;
  wire::header second;
  BOOST_REQUIRE(wire::decode(bytes.data(), first));
  BOOST_REQUIRE(wire::decode(bytes.data() + wire::header_size, second));
  BOOST_TEST((first.type == wire::frame_type::ack));
  BOOST_TEST(first.length == 1u);
  BOOST_TEST((second.type == wire::frame_type::ack));
  BOOST_TEST(second.length == 2u);
  BOOST_TEST(second.seq == first.seq + 1);
  ::close(fds[0]);
  ::close(fds[1]);
}

// -- atomic frames --

namespace {

/// Sends an atomic request frame with its operands.
void send_atomic(raw_socket& raw, wire::frame_type type, uint32_t seq,
                 uint64_t addr, uint32_t rkey, uint64_t compare_add,
                 uint64_t swap, uint32_t length = 8) {
  wire::header h;
  h.type = type;
  h.seq = seq;
  h.length = length;
  h.addr = addr;
  h.rkey = rkey;
  std::array<uint8_t, wire::atomic_operand_bytes> ops{};
  wire::put_u64(ops.data(), compare_add);
  wire::put_u64(ops.data() + 8, swap);
  raw.send_frame(h, ops.data(), ops.size());
}

/// Expects an atomic_response carrying `old`.
void expect_old_value(raw_socket& raw, uint64_t old) {
  auto resp = raw.read_header();
  BOOST_REQUIRE(resp);
  BOOST_REQUIRE((resp->type == wire::frame_type::atomic_response));
  BOOST_TEST(resp->length == 8u);
  std::array<uint8_t, 8> bytes{};
  BOOST_REQUIRE(raw.read_exact(bytes.data(), 8, 2s));
  BOOST_TEST(wire::get_u64(bytes.data()) == old);
}

/// Expects a NAK with `st`, the end of the connection, and the QP failed.
void expect_nak(raw_session& s, wc_status st) {
  auto nak = s.raw->read_header();
  BOOST_REQUIRE(nak);
  BOOST_TEST((nak->type == wire::frame_type::nak));
  BOOST_TEST(nak->status == st);
  BOOST_TEST(s.raw->wait_closed(3s));
  BOOST_TEST(wait_error(*s.qp));
}

} // namespace

BOOST_AUTO_TEST_CASE(atomic_frames_get_the_old_value) {
  raw_session s;
  auto word = make_buffer(*s.dev, 64, local_write | remote_atomic);
  auto rkey = word.mr->rkey();
  send_atomic(*s.raw, wire::frame_type::fetch_add, 0, word.addr(8), rkey, 40,
              0);
  expect_old_value(*s.raw, 0);
  send_atomic(*s.raw, wire::frame_type::fetch_add, 1, word.addr(8), rkey, 2, 0);
  expect_old_value(*s.raw, 40);
  send_atomic(*s.raw, wire::frame_type::compare_swap, 2, word.addr(8), rkey, 41,
              7);
  expect_old_value(*s.raw, 42);
  send_atomic(*s.raw, wire::frame_type::compare_swap, 3, word.addr(8), rkey, 42,
              7);
  expect_old_value(*s.raw, 42);
  BOOST_TEST(word_at(word.data() + 8) == 7u);
  BOOST_TEST(!s.qp->in_error());
}

BOOST_AUTO_TEST_CASE(an_atomic_with_a_bad_rkey_is_nakked) {
  raw_session s;
  auto word = make_buffer(*s.dev, 64, local_write | remote_atomic, 0x5C);
  send_atomic(*s.raw, wire::frame_type::fetch_add, 0, word.addr(),
              word.mr->rkey() + 1, 1, 0);
  expect_nak(s, wc_status::remote_access_error);
  BOOST_TEST(all_bytes(word.data(), 64, 0x5C));
}

BOOST_AUTO_TEST_CASE(an_atomic_on_memory_without_remote_atomic_is_nakked) {
  raw_session s;
  // s.mem: local_write | remote_write | remote_read.
  send_atomic(*s.raw, wire::frame_type::compare_swap, 0, s.mem.addr(),
              s.mem.mr->rkey(), 0x5C5C5C5C5C5C5C5Cu, 1);
  expect_nak(s, wc_status::remote_access_error);
  BOOST_TEST(all_bytes(s.mem.data(), 4096, 0x5C));
}

BOOST_AUTO_TEST_CASE(an_atomic_outside_the_region_is_nakked) {
  raw_session s;
  auto word = make_buffer(*s.dev, 64, local_write | remote_atomic, 0x5C);
  send_atomic(*s.raw, wire::frame_type::fetch_add, 0, word.addr(64),
              word.mr->rkey(), 1, 0);
  expect_nak(s, wc_status::remote_access_error);
  BOOST_TEST(all_bytes(word.data(), 64, 0x5C));
}

BOOST_AUTO_TEST_CASE(a_misaligned_atomic_is_nakked) {
  raw_session s;
  auto word = make_buffer(*s.dev, 64, local_write | remote_atomic, 0x5C);
  send_atomic(*s.raw, wire::frame_type::fetch_add, 0, word.addr(4),
              word.mr->rkey(), 1, 0);
  expect_nak(s, wc_status::remote_operation_error);
  BOOST_TEST(all_bytes(word.data(), 64, 0x5C));
}

BOOST_AUTO_TEST_CASE(an_atomic_of_another_length_is_a_violation) {
  raw_session s;
  auto word = make_buffer(*s.dev, 64, local_write | remote_atomic, 0x5C);
  send_atomic(*s.raw, wire::frame_type::fetch_add, 0, word.addr(),
              word.mr->rkey(), 1, 0, 16);
  s.expect_violation();
  BOOST_TEST(all_bytes(word.data(), 64, 0x5C));
}

BOOST_AUTO_TEST_CASE(an_atomic_response_without_an_atomic) {
  raw_session s;
  wire::header h;
  h.type = wire::frame_type::atomic_response;
  h.length = 8;
  uint64_t x = 5;
  s.raw->send_frame(h, &x, 8);
  s.expect_violation();
}

BOOST_AUTO_TEST_SUITE_END()
