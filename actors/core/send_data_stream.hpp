#pragma once

// Internal to the agent: the sender's side of one send_data call (SendData
// chunks).  Not installed.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "rdmactor/local_mr.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor {

/// One send_data call: which bytes go next, how many chunks are in flight
/// (at most `window`), and when it ends: with the bytes sent once the
/// peer acknowledged every chunk, or with the first error.  Decides and
/// counts; the agent core encodes and posts each chunk (eager: a slice
/// of at most `chunk_max` bytes behind its header; rendezvous: a piece the
/// peer reads through `read_registration`).  CAF-free, single-threaded.
class send_data_stream {
public:
  /// Called once: the bytes sent, or the first error; may be empty.  What
  /// it throws is caught and logged.
  using done_fn = std::function<void(caf::expected<uint64_t>)>;

  /// Sends `mr` (valid; may be empty: then one empty chunk) in chunks of
  /// at most `chunk_max` payload bytes, `window` (>= 1) in flight at most;
  /// every chunk carries `imm` when set (SendData.imm).
  send_data_stream(local_mr mr, size_t chunk_max, size_t window,
                   std::optional<uint32_t> imm, done_fn done);

  /// Another chunk may be issued now: the stream has not ended, fewer
  /// than `window` chunks are in flight, and bytes are left (or none was
  /// issued yet).
  bool wants_chunk() const noexcept {
    return !ended_ && outstanding_ < window_
           && (offset_ < mr_.size() || chunks_ == 0);
  }

  /// Bytes not issued yet.
  size_t left() const noexcept {
    return mr_.size() - offset_;
  }

  /// Issues the next eager chunk: the next at most `chunk_max` bytes.
  local_mr next_eager();

  /// Issues the next rendezvous piece of at most `max` (> 0) bytes: its
  /// offset in `mr()` and its length.
  std::pair<size_t, size_t> next_piece(uint64_t max);

  /// A chunk of `len` bytes was answered: acknowledged when `err` is
  /// empty.  Ends the stream with the first error, or with the bytes
  /// sent once the last chunk was acknowledged.  Returns whether more
  /// chunks may go (the caller issues them); false once ended.
  bool answered(size_t len, const caf::error& err);

  /// Ends the stream with `err` (nothing after an end).
  void fail(const caf::error& err);

  /// `done` was called.
  bool ended() const noexcept {
    return ended_;
  }

  const local_mr& mr() const noexcept {
    return mr_;
  }

  size_t chunk_max() const noexcept {
    return chunk_max_;
  }

  const std::optional<uint32_t>& imm() const noexcept {
    return imm_;
  }

  size_t outstanding() const noexcept {
    return outstanding_;
  }

  /// Rendezvous: `mr` registered for the peer's remote read, made at the
  /// first rendezvous piece; deregistered when the stream goes.  Null
  /// before.
  const transport::memory_region* read_registration() const noexcept {
    return read_reg_.get();
  }

  void set_read_registration(std::unique_ptr<transport::memory_region> reg) {
    read_reg_ = std::move(reg);
  }

private:
  /// Ends the stream: calls `done` with `result`.
  void finish(caf::expected<uint64_t> result);

  local_mr mr_;
  size_t chunk_max_;
  size_t window_;
  std::optional<uint32_t> imm_;
  done_fn done_;
  std::unique_ptr<transport::memory_region> read_reg_;
  size_t offset_ = 0;      ///< next byte to issue
  size_t chunks_ = 0;      ///< chunks issued so far
  size_t outstanding_ = 0; ///< issued, not answered
  uint64_t acked_ = 0;     ///< bytes acknowledged
  bool ended_ = false;
};

} // namespace rdmactor
