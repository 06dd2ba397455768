#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_control_block.hpp>
#include <caf/expected.hpp>

#include "rdmactor/error.hpp"

namespace rdmactor {

/// Actors published under names (thread-safe): one per node (reachable
/// through every connection of the node) and one per connection.  Holds
/// each actor strongly while it is published, as CAF io's publish does.
class actor_directory {
public:
  /// Publishes `actor` under `name`; returns whether it replaced another.
  bool put(const std::string& name, caf::strong_actor_ptr actor) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& slot = actors_[name];
    bool replaced = slot != nullptr;
    slot = std::move(actor);
    return replaced;
  }

  /// Longest name `publish` takes, in bytes.
  static constexpr size_t max_name_bytes = 256;

  /// Checks and publishes `actor` under `name`; returns whether it replaced
  /// another, or `invalid_argument` for an empty name, one over
  /// `max_name_bytes`, or an invalid actor.  Used by the connection's and
  /// the node's publish.
  caf::expected<bool> publish(const std::string& name,
                              const caf::actor& actor) {
    if (name.empty() || name.size() > max_name_bytes)
      return make_error(
          errc::invalid_argument,
          "actor names have 1 to " + std::to_string(max_name_bytes)
              + " bytes; this one has " + std::to_string(name.size()));
    if (!actor)
      return make_error(errc::invalid_argument,
                        "cannot publish an invalid actor");
    return put(name, caf::actor_cast<caf::strong_actor_ptr>(actor));
  }

  /// Unpublishes `name`; returns whether something was published under it.
  /// Proxies the peers already hold keep working while the actor lives.
  bool erase(const std::string& name) {
    std::lock_guard<std::mutex> guard{mtx_};
    return actors_.erase(name) > 0;
  }

  /// Returns the actor published under `name` (null: none).
  caf::strong_actor_ptr get(const std::string& name) const {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = actors_.find(name);
    return i != actors_.end() ? i->second : nullptr;
  }

  /// Unpublishes everything (the node's or the connection's close).
  void clear() {
    std::unordered_map<std::string, caf::strong_actor_ptr> tmp;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      tmp.swap(actors_);
    }
  }

private:
  mutable std::mutex mtx_;
  std::unordered_map<std::string, caf::strong_actor_ptr> actors_;
};

using actor_directory_ptr = std::shared_ptr<actor_directory>;

} // namespace rdmactor
