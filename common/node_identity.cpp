#include "common/node_identity.hpp"

#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <utility>

#include <unistd.h>

#include <caf/actor_registry.hpp>

// CAF 0.17 lets only its own network layers set an actor system's node id
// (`friend class net::middleman` in caf/actor_system.hpp).  CAF 0.17 has
// no caf::net layer (it came with 0.18), so the name is free: rdmactor's
// network layer takes it, for this one assignment.
namespace caf::net {

class middleman {
public:
  static void set_node(caf::actor_system& sys, caf::node_id id) {
    sys.node_ = std::move(id);
  }
};

} // namespace caf::net

namespace rdmactor {

void assign_node_id(caf::actor_system& sys) {
  if (sys.node())
    return;
  caf::node_id::default_data::host_id_type host;
  std::random_device rd;
  for (auto& b : host)
    b = static_cast<uint8_t>(rd());
  // An all-zero host id is CAF's invalid one.
  host[0] |= 1;
  caf::net::middleman::set_node(
      sys, caf::make_node_id(static_cast<uint32_t>(::getpid()), host));
}

std::optional<node_secret> secret_of(const caf::actor_system& sys) {
  const auto& id = sys.node();
  if (!id)
    return std::nullopt;
  auto* data = dynamic_cast<const caf::node_id::default_data*>(id.operator->());
  if (data == nullptr)
    return std::nullopt;
  return data->host_id();
}

bool holds_secret(const node_secret& secret, const char* data, size_t len) {
  return ::memmem(data, len, secret.data(), secret.size()) != nullptr;
}

std::vector<uint64_t> serialized_local_ids(const node_secret& secret,
                                           const char* data, size_t len) {
  constexpr size_t before = 8 + 8 + 4; // actor id, tag, process id
  auto tag = static_cast<uint64_t>(caf::node_id::default_data::class_id);
  auto read_u64 = [](const char* p) {
    uint64_t x = 0;
    for (int i = 0; i < 8; ++i)
      x = (x << 8) | static_cast<uint8_t>(p[i]);
    return x;
  };
  std::vector<uint64_t> ids;
  const char* end = data + len;
  for (const char* p = data; p < end;) {
    auto* hit = static_cast<const char*>(::memmem(
        p, static_cast<size_t>(end - p), secret.data(), secret.size()));
    if (hit == nullptr)
      break;
    if (static_cast<size_t>(hit - data) >= before
        && read_u64(hit - before + 8) == tag)
      ids.push_back(read_u64(hit - before));
    p = hit + 1;
  }
  return ids;
}

namespace {

/// Connections that hold each handed actor, by system and actor id.
struct handed_table {
  std::mutex mtx;
  std::map<std::pair<const caf::actor_system*, uint64_t>, size_t> holds;
};

handed_table& handed() {
  static handed_table table;
  return table;
}

} // namespace

std::vector<caf::strong_actor_ptr>
hold_handed(caf::actor_system& sys, const std::vector<uint64_t>& ids) {
  std::vector<caf::strong_actor_ptr> found;
  auto& t = handed();
  std::lock_guard<std::mutex> guard{t.mtx};
  for (auto id : ids) {
    auto actor = sys.registry().get(id);
    if (!actor)
      continue;
    ++t.holds[{&sys, id}];
    found.push_back(std::move(actor));
  }
  return found;
}

void release_handed(caf::actor_system& sys, const std::vector<uint64_t>& ids) {
  auto& t = handed();
  std::lock_guard<std::mutex> guard{t.mtx};
  for (auto id : ids) {
    auto i = t.holds.find({&sys, id});
    if (i == t.holds.end())
      continue;
    if (--i->second == 0) {
      t.holds.erase(i);
      sys.registry().erase(id);
    }
  }
}

void unregister_serialized(caf::actor_system& sys,
                           const std::vector<uint64_t>& ids) {
  auto& t = handed();
  std::lock_guard<std::mutex> guard{t.mtx};
  for (auto id : ids)
    if (t.holds.count({&sys, id}) == 0)
      sys.registry().erase(id);
}

} // namespace rdmactor
