// The memory a node keeps alive for one peer.

#include "actors/core/held_regions.hpp"

#include <algorithm>

#include "rdmactor/error.hpp"

namespace rdmactor {

caf::expected<mr_token> held_regions::hold(local_mr mr, bool by_peer,
                                           uint32_t lease_ms, time_point now,
                                           memory_pool& pool) {
  auto token = mr.token();
  if (holds(token))
    return make_error(errc::already_sent,
                      "this memory region was already sent to the peer and "
                      "not released yet");
  owned_mr entry{mr, by_peer};
  if (lease_ms != 0) {
    auto reg = pool.register_again(mr);
    if (!reg)
      return std::move(reg.error());
    entry.lease_reg
        = std::shared_ptr<transport::memory_region>{std::move(*reg)};
    token.rkey = entry.lease_reg->rkey();
    entry.lease_end = now + std::chrono::milliseconds{lease_ms};
    entry.lease_ms = lease_ms;
  }
  if (by_peer) {
    peer_bytes_ += mr.size();
    peer_mrs_ += 1;
  }
  regions_.emplace(token, std::move(entry));
  return token;
}

local_mr held_regions::erase(owned_regions::iterator i) {
  if (i->second.by_peer) {
    peer_bytes_ -= i->second.mr.size();
    peer_mrs_ -= 1;
  }
  auto mr = std::move(i->second.mr);
  regions_.erase(i);
  return mr;
}

std::optional<local_mr> held_regions::release(const mr_token& token) {
  auto i = regions_.find(token);
  if (i == regions_.end())
    return std::nullopt;
  return erase(i);
}

std::optional<uint32_t> held_regions::renew(const mr_token& token,
                                            uint32_t lease_ms, time_point now) {
  auto i = regions_.find(token);
  if (i == regions_.end() || !i->second.lease_reg)
    return std::nullopt;
  auto grant = std::min(lease_ms, i->second.lease_ms);
  i->second.lease_end = now + std::chrono::milliseconds{grant};
  return grant;
}

held_regions::time_point held_regions::expire(
    time_point now,
    const std::function<void(const mr_token&, const owned_mr&)>& revoked) {
  auto next = time_point::max();
  for (auto i = regions_.begin(); i != regions_.end();) {
    if (!i->second.lease_reg) {
      ++i;
      continue;
    }
    if (i->second.lease_end > now) {
      next = std::min(next, i->second.lease_end);
      ++i;
      continue;
    }
    revoked(i->first, i->second);
    erase(i++);
  }
  return next;
}

owned_regions held_regions::take_all() {
  auto result = std::move(regions_);
  regions_.clear();
  peer_bytes_ = 0;
  peer_mrs_ = 0;
  return result;
}

} // namespace rdmactor
