// Writes the seed corpus of rdmactor_fuzz_decode: one valid frame per
// message kind, small enough to keep in the repository.
//
// Usage: rdmactor_fuzz_decode_corpus DIR

#include "protocol/codec.hpp"
#include "protocol/messages.hpp"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

using namespace rdmactor;
using namespace rdmactor::protocol;

namespace {

/// One seed: a file name and the frame stored in it.
struct seed {
  std::string name;
  std::vector<uint8_t> frame;
};

/// Encodes `msg` followed by `payload` into one frame.
std::vector<uint8_t> frame_of(const Message& msg,
                              const std::vector<uint8_t>& payload = {}) {
  constexpr size_t max_len = 1024;
  std::vector<uint8_t> buf(max_len);
  auto res = encode(msg, buf.data(), buf.size(), max_len);
  if (res.code != errc::none || res.payload_capacity < payload.size())
    return {};
  buf.resize(res.header_len);
  buf.insert(buf.end(), payload.begin(), payload.end());
  return buf;
}

/// `first` marked as followed by `second` (packed frames).
std::vector<uint8_t> packed(std::vector<uint8_t> first,
                            const std::vector<uint8_t>& second) {
  if (first.empty() || second.empty())
    return {};
  mark_more_frames(first.data());
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

/// Returns every seed.
std::vector<seed> seeds() {
  auto token = make_token(0x7f12345678000, 4096, 0x1a2b);
  std::vector<uint8_t> payload(16);
  for (size_t i = 0; i < payload.size(); ++i)
    payload[i] = static_cast<uint8_t>(i);
  return {
      {"alloc_mr", frame_of(make_alloc_mr(0x1234567890abcdef, 4096, 64))},
      {"release_mr", frame_of(make_release_mr(2, token))},
      {"send_mr_local", frame_of(make_send_mr(3, SendMR::LOCAL, token))},
      {"send_mr_remote", frame_of(make_send_mr(4, SendMR::REMOTE, token))},
      {"send_data_empty", frame_of(make_send_data(5, 0))},
      {"send_data_16", frame_of(make_send_data(6, payload.size()), payload)},
      {"alloc_mr_response_ok",
       frame_of(make_alloc_mr_response(1, OK, "", token))},
      {"alloc_mr_response_error",
       frame_of(make_alloc_mr_response(1, OUT_OF_MEMORY, "arena full"))},
      {"release_mr_response",
       frame_of(make_release_mr_response(2, UNKNOWN_TOKEN, "no such MR"))},
      {"send_mr_response", frame_of(make_send_mr_response(3, OK, ""))},
      {"send_data_response",
       frame_of(make_send_data_response(6, QUOTA_EXCEEDED, "quota"))},
      {"hello", frame_of(make_hello(protocol_version, 65536, 64))},
      {"packed_send_data",
       packed(frame_of(make_send_data(6, payload.size()), payload),
              frame_of(make_send_data(5, 0)))},
  };
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  for (const auto& [name, frame] : seeds()) {
    if (frame.empty()) {
      std::fprintf(stderr, "cannot encode seed %s\n", name.c_str());
      return 1;
    }
    auto path = std::string{argv[1]} + "/" + name;
    auto* file = std::fopen(path.c_str(), "wb");
    if (file == nullptr) {
      std::perror(path.c_str());
      return 1;
    }
    auto written = std::fwrite(frame.data(), 1, frame.size(), file);
    if (std::fclose(file) != 0 || written != frame.size()) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
