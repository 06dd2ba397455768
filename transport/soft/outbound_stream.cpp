#include "transport/soft/outbound_stream.hpp"

#include "transport/soft/limits.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/socket.h>
#include <sys/uio.h>

namespace rdmactor::transport::soft {

void outbound_stream::push(wire::header h, const range_list& payload,
                           time_point now, const uint8_t* inline_bytes) {
  frame f;
  h.seq = next_seq_++;
  f.hdr = h;
  wire::encode(h, f.bytes.data());
  if (wire::is_atomic(h.type) || h.type == wire::frame_type::atomic_response) {
    auto n = wire::payload_bytes(h);
    if (inline_bytes != nullptr)
      std::memcpy(f.bytes.data() + wire::header_size, inline_bytes, n);
    else
      std::memset(f.bytes.data() + wire::header_size, 0, n);
    f.bytes_len = wire::header_size + n;
  } else {
    f.payload = payload;
  }
  if (faults_.corrupt_frame && ++fault_frames_ == *faults_.corrupt_frame) {
    wire::corrupt(f.bytes.data());
    f.corrupted = true;
  }
  f.total = wire::header_size + wire::payload_bytes(h);
  f.not_before = now + faults_.delay;
  if (!wire::is_request(h.type))
    ++responses_;
  frames_.push_back(std::move(f));
}

outbound_stream::pump_result outbound_stream::pump(int fd, time_point now) {
  pump_result res;
  blocked_ = false;
  // After a registration of a later frame turned out invalid, the head
  // goes alone: the frames before the bad one still leave, and the bad
  // one fails only when it is the head.
  bool head_only = false;
  while (!frames_.empty()) {
    auto& head = frames_.front();
    if (head.sent == 0 && head.not_before > now) {
      res.status = pump_status::delayed;
      return res;
    }
    uint64_t budget = limits::gather_bytes;
    if (faults_.drop_after_bytes) {
      auto limit = *faults_.drop_after_bytes;
      uint64_t allowed = fault_bytes_ >= limit ? 0 : limit - fault_bytes_;
      if (allowed == 0) {
        res.status = pump_status::dropped;
        return res;
      }
      budget = std::min(budget, allowed);
    }
    // Gather the unsent rest of the head and as many whole frames behind
    // it as the iovec, the lock set and the byte budget take.
    std::array<iovec, limits::gather_frames*(1 + max_sge)> iov{};
    size_t niov = 0;
    shared_touch touch;
    uint64_t gathered = 0;
    size_t nframes = 0;
    for (auto& f : frames_) {
      if (nframes > 0
          && (head_only || nframes == limits::gather_frames
              || gathered >= budget || f.not_before > now
              || niov + 1 + f.payload.size > iov.size()))
        break;
      auto locks = touch.size();
      bool fits = true;
      for (size_t i = 0; i < f.payload.size && fits; ++i)
        fits = touch.add(f.payload.items[i].reg.get());
      if (!fits) {
        touch.truncate(locks);
        break; // only a frame behind the head can miss (capacity >= max_sge)
      }
      uint64_t skip = f.sent;
      auto add = [&](uint8_t* p, uint64_t len) {
        if (skip >= len) {
          skip -= len;
          return;
        }
        p += skip;
        len -= skip;
        skip = 0;
        auto k = std::min(len, budget - gathered);
        if (k == 0)
          return;
        iov[niov].iov_base = p;
        iov[niov].iov_len = static_cast<size_t>(k);
        ++niov;
        gathered += k;
      };
      add(f.bytes.data(), f.bytes_len);
      for (size_t i = 0; i < f.payload.size; ++i)
        add(f.payload.items[i].ptr, f.payload.items[i].len);
      ++nframes;
    }
    if (!touch.acquire()) {
      if (nframes > 1) {
        touch.release();
        head_only = true;
        continue;
      }
      res.status = pump_status::unregistered;
      return res;
    }
    msghdr msg{};
    msg.msg_iov = iov.data();
    msg.msg_iovlen = niov;
    auto n = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    touch.release();
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        blocked_ = true;
        res.status = pump_status::blocked;
        return res;
      }
      res.status = pump_status::failed;
      res.error = errno;
      return res;
    }
    ++res.writes;
    head_only = false;
    // Hand the written bytes to the frames in order; a frame the socket
    // took in part stays at the head (the next call says EAGAIN or more).
    auto written = static_cast<uint64_t>(n);
    res.bytes += written;
    fault_bytes_ += written;
    while (written > 0) {
      auto& f = frames_.front();
      auto k = std::min(written, f.total - f.sent);
      f.sent += k;
      written -= k;
      if (f.sent < f.total)
        break;
      if (wire::is_request(f.hdr.type))
        ++res.requests_written;
      else
        --responses_;
      frames_.pop_front();
    }
  }
  res.status = pump_status::idle;
  return res;
}

bool outbound_stream::abort(bool keep_responses) {
  blocked_ = false;
  bool cut = !frames_.empty() && frames_.front().sent > 0;
  if (!keep_responses || cut) {
    frames_.clear();
    responses_ = 0;
    return !cut;
  }
  if (frames_.empty())
    return true;
  auto seq = frames_.front().hdr.seq;
  ring_deque<frame> kept;
  responses_ = 0;
  for (auto& f : frames_) {
    if (wire::is_request(f.hdr.type)) {
      if (f.hdr.acks == 0)
        continue;
      // The request goes, the ACKs it carried stay.
      wire::header ack;
      ack.type = wire::frame_type::ack;
      ack.length = f.hdr.acks;
      f.hdr = ack;
      f.payload = range_list{};
      f.total = wire::header_size;
      f.bytes_len = wire::header_size;
    }
    ++responses_;
    f.hdr.seq = seq++;
    wire::encode(f.hdr, f.bytes.data());
    if (f.corrupted)
      wire::corrupt(f.bytes.data());
    kept.push_back(std::move(f));
  }
  frames_ = std::move(kept);
  next_seq_ = seq;
  return true;
}

std::optional<time_point> outbound_stream::release_time() const noexcept {
  if (frames_.empty() || frames_.front().sent > 0)
    return std::nullopt;
  return frames_.front().not_before;
}

void outbound_stream::set_faults(const fault_plan& plan) noexcept {
  faults_ = plan;
  fault_bytes_ = 0;
  fault_frames_ = 0;
}

} // namespace rdmactor::transport::soft
