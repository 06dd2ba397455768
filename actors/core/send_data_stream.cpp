#include "actors/core/send_data_stream.hpp"

#include <algorithm>
#include <exception>

#include "common/logging.hpp"

namespace rdmactor {

send_data_stream::send_data_stream(local_mr mr, size_t chunk_max, size_t window,
                                   std::optional<uint32_t> imm, done_fn done)
    : mr_(std::move(mr)), chunk_max_(chunk_max),
      window_(std::max<size_t>(window, 1)), imm_(imm), done_(std::move(done)) {}

local_mr send_data_stream::next_eager() {
  auto len = std::min(chunk_max_, left());
  // In range by construction: offset_ + len <= size.
  auto chunk = mr_.slice(offset_, len);
  offset_ += len;
  ++chunks_;
  ++outstanding_;
  return chunk ? std::move(*chunk) : local_mr{};
}

std::pair<size_t, size_t> send_data_stream::next_piece(uint64_t max) {
  auto len = static_cast<size_t>(std::min<uint64_t>(left(), max));
  std::pair<size_t, size_t> piece{offset_, len};
  offset_ += len;
  ++chunks_;
  ++outstanding_;
  return piece;
}

bool send_data_stream::answered(size_t len, const caf::error& err) {
  if (outstanding_ > 0)
    --outstanding_;
  if (ended_)
    return false;
  if (err) {
    fail(err);
    return false;
  }
  acked_ += len;
  if (outstanding_ == 0 && offset_ >= mr_.size()) {
    finish(acked_);
    return false;
  }
  return true;
}

void send_data_stream::fail(const caf::error& err) {
  if (ended_)
    return;
  finish(err);
}

void send_data_stream::finish(caf::expected<uint64_t> result) {
  ended_ = true;
  if (!done_)
    return;
  // The caller's callback (a data handler's, say) runs inside the agent
  // core: what it throws must not unwind into it.
  try {
    done_(std::move(result));
  } catch (const std::exception& e) {
    log().error("a send_data callback threw: {}", e.what());
  } catch (...) {
    log().error("a send_data callback threw an exception that is not a "
                "std::exception");
  }
}

} // namespace rdmactor
