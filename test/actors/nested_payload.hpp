#pragma once

// CAF's bytes for a message of one caf::config_value nested in lists
// `levels` deep, written without CAF's serializer (which would recurse as
// deep as the nest): what a hostile peer sends to overflow a stack.

#include <cstdint>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <caf/actor_system.hpp>
#include <caf/config_value.hpp>

#include "actors/remote/actor_codec.hpp"

namespace rdmactor::test {

/// The message's bytes: the bytes of depth 1, with the bytes one level adds
/// (found by comparing depths 1 and 2) repeated `levels - 1` times.
inline std::vector<uint8_t> nested_config_value_bytes(caf::actor_system& sys,
                                                      int levels) {
  auto bytes_of = [&](int n) {
    caf::config_value v{int64_t{7}};
    for (int i = 0; i < n; ++i)
      v = caf::config_value{caf::config_value::list{v}};
    auto b = serialize_message(sys, caf::make_message(v));
    BOOST_REQUIRE(b);
    return std::vector<uint8_t>(b->begin(), b->end());
  };
  auto one = bytes_of(1);
  auto two = bytes_of(2);
  BOOST_REQUIRE(two.size() > one.size());
  size_t at = 0;
  while (at < one.size() && one[at] == two[at])
    ++at;
  auto first = two.begin() + static_cast<std::ptrdiff_t>(at);
  std::vector<uint8_t> unit(
      first, first + static_cast<std::ptrdiff_t>(two.size() - one.size()));
  std::vector<uint8_t> out(one.begin(),
                           one.begin() + static_cast<std::ptrdiff_t>(at));
  for (int i = 1; i < levels; ++i)
    out.insert(out.end(), unit.begin(), unit.end());
  out.insert(out.end(), one.begin() + static_cast<std::ptrdiff_t>(at),
             one.end());
  // The construction is CAF's own bytes where CAF can still write them.
  if (levels == 5)
    BOOST_REQUIRE(out == bytes_of(5));
  return out;
}

} // namespace rdmactor::test
