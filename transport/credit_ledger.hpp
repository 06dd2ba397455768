#pragma once

#include <cstdint>

#include "common/tuning.hpp"

namespace rdmactor::transport {

/// The credit rules of one connection, without a queue pair or an actor
/// (the link that owns one is driven by the agent, or by the transport
/// actor for a raw link; tests drive it directly).
///
/// A credit is a receive the peer has posted for us.  Each side starts with
/// `recv_depth` credits.  Every SEND carries, in its immediate data, the
/// receives its sender reposted since its last report.  A data SEND needs
/// two credits (one stays in reserve for a credit-only message); a
/// credit-only message (bit 31 of the immediate) needs one.  A credit-only
/// message is due when at least half the pool is owed, at least one of the
/// owed receives was consumed by a data message (so credit-only messages
/// never answer each other), and no data send that can go now would carry
/// the credits anyway.
///
/// Credits are a contract: the ledger also counts what the peer was
/// granted (`recv_depth`, with which its own ledger starts, plus every
/// credit reported in an immediate value) and what it consumed (every
/// receive it used: data and credit-only messages, RDMA WRITEs with
/// immediate data).  An honest peer never consumes more than it was
/// granted: it only spends credits it learned from sends we posted, and
/// the grant is counted before the send is posted.  A peer that does
/// ignores credits (`on_consumed` returns false): the owner ends the
/// connection.  This bounds what such a peer can make us queue to the
/// replies of about the receives it was granted.
///
/// Caller: the link's owner, one activation at a time; not thread-safe.
class credit_ledger {
public:
  /// Immediate-data bit of a credit-only message.
  static constexpr uint32_t credit_only_bit = uint32_t{1} << 31;
  /// Immediate-data bits that carry returned credits.
  static constexpr uint32_t credit_mask = credit_only_bit - 1;

  explicit credit_ledger(uint32_t recv_depth = 0) noexcept
      : recv_depth_(recv_depth), credits_(recv_depth), granted_(recv_depth) {}

  /// Receives the peer has posted for us.
  uint32_t credits() const noexcept {
    return credits_;
  }

  /// Reposted receives not reported to the peer yet.
  uint32_t owed() const noexcept {
    return owed_total_;
  }

  /// Whether a data SEND may go now (it keeps one credit in reserve).
  bool can_send_data(uint32_t after_sends = 0) const noexcept {
    return credits_ >= after_sends + 2;
  }

  /// Takes the credit of a SEND about to be posted and returns its
  /// immediate data: the owed receives (now reported), plus
  /// `credit_only_bit` for a credit-only message.
  uint32_t take_for_send(bool credit_only) noexcept {
    auto imm
        = (owed_total_ & credit_mask) | (credit_only ? credit_only_bit : 0);
    granted_ += imm & credit_mask;
    --credits_;
    owed_total_ = 0;
    owed_data_ = 0;
    return imm;
  }

  /// Takes the credit of an RDMA WRITE with immediate data about to be
  /// posted: it consumes one of the peer's receives like a data SEND (and
  /// is gated by `can_send_data` likewise), but its immediate value is the
  /// application's, so it reports no credits: what is owed stays owed.
  void take_for_write_imm() noexcept {
    --credits_;
  }

  /// Takes the immediate data of a received message: adds the credits it
  /// returns.  Returns true when it was credit-only (not for the
  /// subscriber; its receive is reposted at once and owed).
  bool on_received(uint32_t imm) noexcept {
    credits_ += imm & credit_mask;
    return (imm & credit_only_bit) != 0;
  }

  /// A receive was reposted: after a credit-only message (`by_data` false)
  /// or once the last handle of a received data message went.
  void on_reposted(bool by_data) noexcept {
    ++owed_total_;
    if (by_data)
      ++owed_data_;
  }

  /// Counts one receive the peer consumed (any message or RDMA WRITE with
  /// immediate data that completed a receive).  Returns false when the
  /// peer has now consumed more receives than it was granted: it ignores
  /// credits, a violation that ends the connection.
  bool on_consumed() noexcept {
    ++consumed_;
    return consumed_ <= granted_;
  }

  /// Receives granted to the peer so far: the initial depth plus every
  /// credit reported to it.
  uint64_t granted() const noexcept {
    return granted_;
  }

  /// Receives the peer consumed so far.
  uint64_t consumed() const noexcept {
    return consumed_;
  }

  /// Receives the peer consumed beyond what it was granted (0 for an
  /// honest peer).
  uint64_t overrun() const noexcept {
    return consumed_ > granted_ ? consumed_ - granted_ : 0;
  }

  /// Whether a credit-only message is due now.  `data_send_can_carry`:
  /// the queue's head is a data send that can go now (it will carry the
  /// credits); `send_queue_full`: no send-queue entry is free.
  bool credit_only_due(bool data_send_can_carry,
                       bool send_queue_full) const noexcept {
    if (owed_data_ == 0
        || owed_total_ < tuning::credit_return_threshold(recv_depth_)
        || credits_ == 0 || send_queue_full)
      return false;
    return !data_send_can_carry;
  }

private:
  uint32_t recv_depth_;
  uint32_t credits_;
  uint32_t owed_total_ = 0; // reposted receives not yet reported
  uint32_t owed_data_ = 0;  // ... of which consumed by data messages
  uint64_t granted_;        // receives granted to the peer (see on_consumed)
  uint64_t consumed_ = 0;   // receives the peer consumed
};

} // namespace rdmactor::transport
