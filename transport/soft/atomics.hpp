#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "rdmactor/transport/fabric.hpp"

namespace rdmactor::transport::soft {

class protection_domain;

/// What an inbound atomic came to: success with the word's old value, or
/// the status a NAK carries (as verbs reports it to the requester) and why.
struct atomic_outcome {
  wc_status status = wc_status::success;
  uint64_t old_value = 0;
  /// Why it failed (a static string); null on success.
  const char* why = nullptr;
};

/// Executes the atomics that peers send to one soft device, the responder
/// half of `queue_pair::post_atomic`.
///
/// Every atomic of the device goes through one `atomic_unit` (the device
/// owns it; every queue pair's event loop calls it), which serializes the
/// atomics on one word with a mutex chosen by the word's address (striped
/// locks), so they are atomic with respect to each other across all
/// queue pairs and event loops of the device.  As on a NIC
/// (IBV_ATOMIC_HCA), not with respect to RDMA WRITEs or READs of the same
/// bytes, nor to the owner's CPU.  The memory is touched under the
/// registration's shared lock, so deregistration waits for it.
///
/// Input is untrusted (it comes from the wire): a word that is not inside
/// a valid registration of `rkey` with `access::remote_atomic` is refused
/// with `remote_access_error`, a misaligned one with
/// `remote_operation_error` (verbs: IBV_WC_REM_INV_REQ_ERR), and nothing is
/// touched.  Thread-safe.
class atomic_unit {
public:
  /// Executes `op` on the 8-byte word at `addr` of the registration of
  /// `rkey` in `pd`: fetch_add adds `compare_add` (wrapping); compare_swap
  /// stores `swap` if the word equals `compare_add`.  Any thread.
  atomic_outcome execute(const protection_domain& pd, atomic_op op,
                         uint32_t rkey, uint64_t addr, uint64_t compare_add,
                         uint64_t swap);

private:
  /// Locks, by address; a power of two.
  static constexpr size_t stripes = 64;

  std::mutex& stripe(uint64_t addr) noexcept {
    return locks_[(addr / atomic_word_bytes) % stripes];
  }

  std::array<std::mutex, stripes> locks_;
};

} // namespace rdmactor::transport::soft
