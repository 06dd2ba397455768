#pragma once

#include <caf/expected.hpp>

#include "transport/soft/unique_fd.hpp"

namespace rdmactor::transport::soft {

/// A non-blocking eventfd: one thread signals, another wakes from `poll()`.
class event_fd {
public:
  /// Creates the eventfd; fails with `fabric_unavailable` when the kernel
  /// refuses (out of file descriptors).
  static caf::expected<event_fd> make();

  /// Returns the descriptor to poll for POLLIN.
  int fd() const noexcept {
    return fd_.get();
  }

  /// Makes the descriptor readable.  Any thread; never blocks.
  void signal() noexcept;

  /// Makes the descriptor unreadable again; returns whether it was
  /// readable.  Never blocks.
  bool drain() noexcept;

private:
  explicit event_fd(unique_fd fd) noexcept : fd_(std::move(fd)) {}

  unique_fd fd_;
};

} // namespace rdmactor::transport::soft
