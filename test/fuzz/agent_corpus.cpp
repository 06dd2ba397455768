// Writes the seed corpus of rdmactor_fuzz_agent: one short program per
// protocol path (test/fuzz/corpus/agent/), so the fuzzer starts from inputs
// that already reach allocation, release, hand-over, data, limits, answers
// to the agent's own requests, timers and disconnects.
//
// Usage: rdmactor_fuzz_agent_corpus DIR

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "test/fuzz/agent_program.hpp"

using namespace rdmactor;
using namespace rdmactor::fuzz;

namespace {

/// One seed: a file name and the program stored in it.
struct seed {
  std::string name;
  std::vector<uint8_t> program;
};

/// Builds programs with named steps.
struct program : program_writer {
  /// Picks the `index`th token the agent handed out.
  program& known_token(uint8_t index) {
    u8(static_cast<uint8_t>(static_cast<uint8_t>(token_pick::known)
                            | (index << 2)));
    return *this;
  }

  program& token(uint64_t addr, uint64_t len, uint32_t rkey) {
    u8(static_cast<uint8_t>(token_pick::explicit_fields));
    u64(addr).u64(len).u32(rkey);
    return *this;
  }

  /// AllocMR of `size_code` (see pick_size: below 0x80, times 37) with
  /// alignment 2^align_log2.
  program& alloc(uint8_t size_code, uint8_t align_log2) {
    operation(op::alloc_mr).u8(size_code).u8(align_log2);
    return *this;
  }

  program& release_known(uint8_t index) {
    operation(op::release_mr);
    return known_token(index);
  }

  program& send_mr_known(uint8_t kind, uint8_t index) {
    operation(op::send_mr).u8(kind);
    return known_token(index);
  }

  program& send_data(uint16_t len, uint8_t skew = 0) {
    operation(op::send_data).u16(len).u8(skew);
    return *this;
  }

  program& user(user_op what, uint16_t operand = 0) {
    operation(op::user).u8(static_cast<uint8_t>(what)).u16(operand);
    return *this;
  }

  /// Answers the `which`th request of the agent with the body of its kind
  /// (`body` 0 AllocMR, 1 ReleaseMR, 2 SendMR, 3 SendData) and `status`.
  program& respond(uint8_t which, uint8_t body, uint8_t status) {
    operation(op::respond).u8(which).u8(body).u8(status);
    return *this;
  }

  program& timeouts(uint8_t count = 0) {
    operation(op::timeouts).u8(count);
    return *this;
  }

  program& raw(const std::vector<uint8_t>& bytes, uint8_t credits = 1) {
    operation(op::raw_frame).u16(static_cast<uint16_t>(bytes.size()));
    program_writer::bytes(bytes);
    u8(credits);
    return *this;
  }
};

/// Encodes a Message as a frame without payload.
std::vector<uint8_t> frame_of(const protocol::Message& msg) {
  std::vector<uint8_t> buf(protocol::frame_header_len + msg.ByteSizeLong());
  auto res = protocol::encode(msg, buf.data(), buf.size(), buf.size());
  buf.resize(res.code == errc::none ? res.header_len : 0);
  return buf;
}

std::vector<seed> seeds() {
  std::vector<seed> out;
  auto add = [&](std::string name, program& p) {
    out.push_back({std::move(name), std::move(p.buf)});
  };
  {
    program p;
    p.alloc(100, 6).alloc(1, 0).release_known(0).release_known(0);
    add("alloc_release", p);
  }
  {
    program p;
    p.alloc(10, 3).send_mr_known(1, 0).user(user_op::receive_local_mr);
    p.user(user_op::drop_handle, 0);
    add("alloc_then_hand_back", p);
  }
  {
    program p;
    p.send_data(100).send_data(0).user(user_op::receive_data);
    p.send_data(50, 10).send_data(20, 0x85);
    add("send_data", p);
  }
  {
    program p;
    p.user(user_op::request_remote_mr, 512);
    p.respond(0, 0, 0);
    p.token(0x7f0000001000, 512, 77);
    p.user(user_op::send_remote_mr, 0).respond(1, 2, 0);
    add("request_remote_then_send_back", p);
  }
  {
    program p;
    p.user(user_op::send_data, 600);
    p.respond(0, 3, 0).respond(1, 3, 0).respond(2, 3, 6);
    add("user_send_data_chunks", p);
  }
  {
    program p;
    p.user(user_op::send_local_mr, 256).respond(0, 2, 0);
    p.release_known(0);
    add("lend_local_then_peer_releases", p);
  }
  {
    program p;
    for (int i = 0; i < 20; ++i)
      p.alloc(120, 6);
    p.operation(op::disconnect);
    add("alloc_flood_then_disconnect", p);
  }
  {
    program p;
    for (int i = 0; i < 10; ++i)
      p.raw({3, 0, 0, 0, 0xff, 0xff, 0xff});
    add("garbage_until_disconnected", p);
  }
  {
    program p;
    for (int i = 0; i < 6; ++i) {
      p.operation(op::send_mr).u8(0);
      p.token(0x10000 * (i + 1), 4096, 9);
    }
    p.user(user_op::receive_remote_mr).user(user_op::release, 0);
    p.user(user_op::receive_remote_mr).user(user_op::drop_handle, 1);
    add("peer_lends_regions", p);
  }
  {
    program p;
    p.user(user_op::receive_data).user(user_op::request_remote_mr, 64);
    p.timeouts().user(user_op::stats);
    add("timeouts", p);
  }
  {
    program p;
    p.raw(frame_of(
        protocol::make_release_mr(7, protocol::make_token(0x1000, 64, 3))));
    p.raw(frame_of(protocol::make_alloc_mr_response(
        99, protocol::OK, "", protocol::make_token(1, 2, 3))));
    p.operation(op::hello).u32(2);
    add("raw_frames_and_wrong_hello", p);
  }
  {
    // Packed frames (EXT_PACKED_FRAMES): a Hello that offers them packed
    // with two requests, then two more requests in one message; the
    // agent's answers come back packed.
    auto hello
        = frame_of(protocol::make_hello(protocol::protocol_version, 4096, 16,
                                        true, protocol::EXT_PACKED_FRAMES));
    auto alloc = frame_of(protocol::make_alloc_mr(11, 64, 8));
    auto release = frame_of(
        protocol::make_release_mr(12, protocol::make_token(0x1000, 64, 3)));
    std::vector<uint8_t> first;
    for (auto* f : {&hello, &alloc, &release}) {
      if (f != &release && !f->empty())
        protocol::mark_more_frames(f->data());
      first.insert(first.end(), f->begin(), f->end());
    }
    auto again = frame_of(protocol::make_alloc_mr(13, 128, 8));
    auto second = frame_of(protocol::make_alloc_mr(14, 64, 8));
    protocol::mark_more_frames(again.data());
    again.insert(again.end(), second.begin(), second.end());
    program p;
    p.raw(first).raw(again).user(user_op::stats);
    add("packed_frames", p);
  }
  {
    program p;
    p.user(user_op::send_data, 2000);
    p.operation(op::credits).u8(4).operation(op::credits).u8(4);
    p.timeouts(3).operation(op::disconnect);
    p.user(user_op::receive_data);
    add("credits_and_disconnect_mid_send", p);
  }
  {
    program p;
    p.operation(op::actor_ack).u8(1).u8(4).u16(1024).u32(0).u32(0);
    p.operation(op::actor_ack).u8(0).u32(5).u32(100);
    p.operation(op::actor_ack).u8(0).u32(0xffffffffu).u32(0);
    p.user(user_op::stats);
    add("hostile_actor_acks", p);
  }
  {
    // Acknowledgements on the peer's SendData: of the agent's own
    // send_data, of an unknown id, and a list over the limit.
    program p;
    p.user(user_op::send_data, 64);
    p.operation(op::acked_send_data)
        .u8(1)
        .u8(2)
        .u8(0)
        .u8(0xff)
        .u64(4242)
        .u16(16);
    p.operation(op::acked_send_data).u8(0).u8(19);
    for (int i = 0; i < 19; ++i)
      p.u8(0);
    p.u16(8);
    add("piggybacked_acks", p);
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  for (const auto& [name, bytes] : seeds()) {
    auto path = std::string{argv[1]} + "/" + name;
    auto* file = std::fopen(path.c_str(), "wb");
    if (file == nullptr) {
      std::perror(path.c_str());
      return 1;
    }
    auto written = std::fwrite(bytes.data(), 1, bytes.size(), file);
    if (std::fclose(file) != 0 || written != bytes.size()) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
