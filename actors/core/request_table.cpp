// The requests of one connection that wait for the peer's answer.

#include "actors/core/request_table.hpp"

#include <algorithm>

#include "common/random.hpp"
#include "common/tuning.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor {

namespace {

/// Request ids leave the top bit clear (room for a future flag).
constexpr uint64_t reserved_id_bit = uint64_t{1} << 63;

} // namespace

request_table::request_table(size_t max_pending)
    : max_pending_(std::min<size_t>(max_pending, slot_mask + 1)) {}

uint64_t request_table::new_id() {
  uint64_t s = free_.empty() ? slots_.size() : free_.back();
  if (s > slot_mask) // full: `add` refuses whatever it gets
    s = 0;
  for (;;) {
    auto id = ((random_u64() << slot_bits) & ~reserved_id_bit) | s;
    if (id != 0)
      return id;
  }
}

const request_table::slot* request_table::find(uint64_t id) const noexcept {
  auto s = id & slot_mask;
  if (id == 0 || s >= slots_.size() || slots_[s].id != id)
    return nullptr;
  return &slots_[s];
}

bool request_table::add(uint64_t id, completion_fn&& done,
                        time_point deadline) {
  if (full() || id == 0 || (id & reserved_id_bit) != 0)
    return false;
  auto s = id & slot_mask;
  if (s < slots_.size()) {
    if (slots_[s].id != 0)
      return false;
    auto i = std::find(free_.rbegin(), free_.rend(), s); // the last, usually
    free_.erase(std::next(i).base());
  } else if (s == slots_.size()) {
    slots_.emplace_back();
  } else {
    return false;
  }
  auto& x = slots_[s];
  x.id = id;
  x.deadline = deadline;
  x.done = std::move(done);
  ++pending_;
  return true;
}

request_table::completion_fn request_table::release(size_t i) {
  auto& x = slots_[i];
  auto fn = std::move(x.done);
  x.done = nullptr;
  x.id = 0;
  free_.push_back(static_cast<uint32_t>(i));
  --pending_;
  return fn;
}

bool request_table::complete(uint64_t id, const protocol::Response* res,
                             const caf::error& err) {
  auto* x = find(id);
  if (x == nullptr)
    return false;
  auto fn = release(static_cast<size_t>(x - slots_.data()));
  // Last: the completion may add requests (and grow the slots).
  fn(res, err);
  return true;
}

size_t request_table::expire(time_point now, const caf::error& err) {
  std::vector<uint64_t> expired;
  for (auto& x : slots_)
    if (x.id != 0 && x.deadline <= now)
      expired.push_back(x.id);
  for (auto id : expired) {
    remember_late(id);
    complete(id, nullptr, err);
  }
  return expired.size();
}

request_table::time_point request_table::next_deadline() const noexcept {
  auto next = time_point::max();
  for (auto& x : slots_)
    if (x.id != 0)
      next = std::min(next, x.deadline);
  return next;
}

void request_table::fail_all(const caf::error& err) {
  std::vector<uint64_t> ids;
  ids.reserve(pending_);
  for (auto& x : slots_)
    if (x.id != 0)
      ids.push_back(x.id);
  for (auto id : ids)
    complete(id, nullptr, err);
}

void request_table::remember_late(uint64_t id) {
  if (!late_id_set_.insert(id).second)
    return;
  late_ids_.push_back(id);
  if (late_ids_.size() > tuning::max_late_responses) {
    late_id_set_.erase(late_ids_.front());
    late_ids_.pop_front();
  }
}

bool request_table::take_late(uint64_t id) {
  if (late_id_set_.erase(id) == 0)
    return false;
  late_ids_.erase_at(std::find(late_ids_.begin(), late_ids_.end(), id).index());
  return true;
}

void request_table::remember_late_alloc(uint64_t id) {
  late_allocs_.push_back(id);
  if (late_allocs_.size() > tuning::max_late_allocs)
    late_allocs_.pop_front();
}

bool request_table::take_late_alloc(uint64_t id) {
  auto i = std::find(late_allocs_.begin(), late_allocs_.end(), id);
  if (i == late_allocs_.end())
    return false;
  late_allocs_.erase_at(i.index());
  take_late(id);
  return true;
}

// -- answers ------------------------------------------------------------------

namespace pb = protocol;

caf::error status_error(const pb::Response& res, const char* what) {
  auto status = pb::status_of(res);
  auto detail = pb::detail_of(res);
  auto code = pb::to_errc(status);
  if (code == errc::none) // only called for refusals; never "no error"
    code = errc::malformed_message;
  return make_error(
      code, std::string{"the peer refused "} + what + ": "
                + pb::to_string(status)
                + (detail.empty() ? std::string{} : " (" + detail + ")"));
}

caf::error check_response(const pb::Response& res,
                          pb::Response::BodyCase expected, const char* what) {
  if (res.body_case() != expected)
    return make_error(errc::malformed_message,
                      std::string{"the peer answered "} + what
                          + " with a response of another kind");
  if (pb::status_of(res) != pb::OK)
    return status_error(res, what);
  return {};
}

} // namespace rdmactor
