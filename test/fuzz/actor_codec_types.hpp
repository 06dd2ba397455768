#pragma once

// The message types that rdmactor_fuzz_actor_codec and its seed writer
// register: what an application typically sends to a remote actor (a
// struct with strings and numbers, nested sequences, maps, bytes) next to
// CAF's built-in types, so that the fuzzer reaches every kind of field the
// bounded deserializer (actors/remote/actor_codec.cpp) reads.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/meta/type_name.hpp>

#include "rdmactor/error.hpp"

namespace rdmactor::fuzz {

/// A small struct of fixed-size fields and a string.
struct codec_point {
  int32_t x = 0;
  int32_t y = 0;
  std::string label;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, codec_point& p) {
  return f(caf::meta::type_name("codec_point"), p.x, p.y, p.label);
}

/// Nested sequences, a map and a byte vector.
struct codec_record {
  uint64_t id = 0;
  std::vector<codec_point> points;
  std::map<std::string, uint64_t> counters;
  std::vector<uint8_t> blob;
  double weight = 0;
  bool flag = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, codec_record& r) {
  return f(caf::meta::type_name("codec_record"), r.id, r.points, r.counters,
           r.blob, r.weight, r.flag);
}

using codec_bytes = std::vector<uint8_t>;
using codec_strings = std::vector<std::string>;

/// The actor system config of the target and of its seed writer: one
/// scheduler thread (nothing runs on it), the types above registered.
struct codec_config : caf::actor_system_config {
  codec_config() {
    register_error_category(*this);
    add_message_type<codec_point>("codec_point");
    add_message_type<codec_record>("codec_record");
    add_message_type<codec_bytes>("codec_bytes");
    add_message_type<codec_strings>("codec_strings");
    add_message_type<std::vector<codec_point>>("codec_points");
    set("scheduler.max-threads", 1);
  }
};

} // namespace rdmactor::fuzz
