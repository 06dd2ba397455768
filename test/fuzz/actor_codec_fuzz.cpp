// libFuzzer target for the remote-actor message decoder
// (`deserialize_message`, actors/remote/actor_codec.cpp): any input is the
// payload of an actor message from an untrusted peer, the bytes that CAF's
// binary format turns into a caf::message of the application's registered types
// (actor_codec_types.hpp) on the receiving node.
//
// Findings besides crashes, sanitizer reports, leaks and allocations over
// libFuzzer's -malloc_limit_mb:
// - a refusal that is not an rdmactor `serialization_failed` error;
// - an accepted message with an element of a banned type (actor handles,
//   nested messages, down and exit messages...);
// - an accepted message that does not print (CAF's default handler prints
//   every message an actor does not handle), that does not serialize again,
//   whose bytes are not accepted again, or whose second round trip gives other
//   bytes;
// - a message that a connection's cache of type lists (message_signatures,
//   kept from input to input as a peer's connection keeps it) accepts or
//   refuses otherwise than a fresh decoder, or loads into other bytes;
//   a message written with the thread's kept type lists into other bytes.

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/message.hpp>

#include "actors/remote/actor_codec.hpp"
#include "rdmactor/error.hpp"
#include "test/fuzz/actor_codec_types.hpp"

using namespace rdmactor;
using namespace rdmactor::fuzz;

namespace {

/// Aborts with `what` unless `ok`: a broken invariant is a finding.
void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "actor_codec_fuzz: %s\n", what);
    std::abort();
  }
}

/// The actor system of the whole run: its type registry is what the
/// decoder consults; no actor runs in it.
struct codec_system {
  codec_config cfg;
  caf::actor_system sys{cfg};
  /// The type lists earlier inputs left, as a connection keeps them.
  message_signatures signatures;
};

codec_system* the_system = nullptr;

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Kept for the whole process and never destroyed: libFuzzer exits without
  // unwinding, and the system's threads must not race its static teardown.
  the_system = new codec_system;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& sys = the_system->sys;
  auto msg = deserialize_message(sys, data, size);
  if (!msg) {
    require(code_of(msg.error()) == errc::serialization_failed,
            "a refusal that is not an rdmactor serialization_failed error");
    require(!deserialize_message(sys, data, size, nullptr, nullptr,
                                 &the_system->signatures),
            "a message a fresh decoder refuses is accepted with cached type "
            "lists");
    return 0;
  }
  auto& types = sys.types();
  for (size_t i = 0; i < msg->size(); ++i) {
    const auto& name = types.portable_name(msg->type(i));
    require(!banned_type_name(name),
            "an accepted message holds a type that cannot travel");
  }
  // What an actor does with a message it does not handle: CAF's default
  // handler (print_and_drop) prints it.
  auto text = caf::to_string(*msg);
  require(!text.empty(), "an accepted message prints as nothing");
  auto bytes = serialize_message(sys, *msg);
  require(static_cast<bool>(bytes), "an accepted message does not serialize");
  std::vector<char> kept;
  require(!serialize_message_into(sys, *msg, kept, nullptr, true)
              && kept == *bytes,
          "a kept written type list writes other bytes");
  auto cached = deserialize_message(sys, data, size, nullptr, nullptr,
                                    &the_system->signatures);
  require(static_cast<bool>(cached),
          "a message a fresh decoder accepts is refused with cached type "
          "lists");
  auto cached_bytes = serialize_message(sys, *cached);
  require(static_cast<bool>(cached_bytes) && *cached_bytes == *bytes,
          "cached type lists load a message into other values");
  auto again = deserialize_message(
      sys, reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
  require(static_cast<bool>(again),
          "the bytes of an accepted message are refused");
  auto bytes2 = serialize_message(sys, *again);
  require(static_cast<bool>(bytes2) && *bytes2 == *bytes,
          "a second round trip gives other bytes");
  return 0;
}
