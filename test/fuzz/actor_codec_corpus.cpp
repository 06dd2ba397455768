// rdmactor_fuzz_actor_codec_corpus DIR: writes the seeds of
// test/fuzz/corpus/actor_codec/ into DIR: the bytes `serialize_message`
// makes of messages an application sends (the types of
// actor_codec_types.hpp and CAF's built-in ones, alone and mixed).

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/config_value.hpp>
#include <caf/duration.hpp>
#include <caf/make_message.hpp>
#include <caf/message_id.hpp>
#include <caf/node_id.hpp>
#include <caf/timestamp.hpp>
#include <caf/unit.hpp>

#include "actors/remote/actor_codec.hpp"
#include "rdmactor/errc.hpp"
#include "rdmactor/error.hpp"
#include "test/fuzz/actor_codec_types.hpp"

using namespace rdmactor;
using namespace rdmactor::fuzz;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  codec_config cfg;
  caf::actor_system sys{cfg};
  int written = 0;
  auto put = [&](const std::string& name, const caf::message& msg) {
    auto bytes = serialize_message(sys, msg);
    if (!bytes) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(),
                   sys.render(bytes.error()).c_str());
      std::exit(1);
    }
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    ++written;
  };
  codec_record rec;
  rec.id = 42;
  rec.points = {{1, 2, "a"}, {-3, 4, "bc"}};
  rec.counters = {{"x", 1}, {"yy", 1u << 20}};
  rec.blob = {0, 1, 2, 255};
  rec.weight = 0.5;
  rec.flag = true;
  put("empty", caf::message{});
  put("i32", caf::make_message(int32_t{7}));
  put("string", caf::make_message(std::string{"hello"}));
  put("atom_i64_string",
      caf::make_message(caf::atom("put"), int64_t{-1}, std::string{"k"}));
  put("numbers", caf::make_message(uint8_t{1}, int16_t{-2}, uint32_t{3},
                                   uint64_t{4}, 1.5f, 2.5));
  put("point", caf::make_message(codec_point{1, 2, "p"}));
  put("record", caf::make_message(rec));
  put("record_and_point", caf::make_message(rec, codec_point{5, 6, ""}));
  put("bytes", caf::make_message(codec_bytes(100, 0x5a)));
  put("strings", caf::make_message(codec_strings{"a", "", "ccc"}));
  put("points", caf::make_message(std::vector<codec_point>{{1, 1, "x"}}));
  put("error", caf::make_message(make_error(errc::peer_gone, "gone")));
  put("timespan", caf::make_message(caf::timespan{std::chrono::seconds(3)}));
  put("duration", caf::make_message(caf::duration{caf::time_unit::seconds, 5}));
  put("timestamp", caf::make_message(caf::make_timestamp()));
  // More of CAF's built-in types, so that their names are in the corpus
  // (CAF's library is not instrumented: coverage does not lead to them).
  put("builtins",
      caf::make_message(std::map<std::string, std::string>{{"k", "v"}},
                        std::set<std::string>{"a", "b"},
                        std::vector<std::string>{"x"}, std::vector<char>{'c'},
                        caf::unit, true, static_cast<long double>(0.25),
                        std::u32string{U"u32"}));
  put("node_and_message_id",
      caf::make_message(sys.node(), caf::make_message_id()));
  put("u16string", caf::make_message(std::u16string{u"wide"}));
  // Config values nest through lists and maps: seeds the fuzzer can grow
  // into deep nests (the decoder refuses more than 64 levels).
  caf::config_value nested{int64_t{7}};
  for (int i = 0; i < 8; ++i)
    nested = caf::config_value{caf::config_value::list{nested}};
  caf::config_value::dictionary dict;
  dict.emplace("k", nested);
  put("config_values", caf::make_message(nested, caf::config_value{dict}));
  std::printf("wrote %d seeds to %s\n", written, dir.c_str());
  return 0;
}
