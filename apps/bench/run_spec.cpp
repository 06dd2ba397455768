#include "apps/bench/run_spec.hpp"

namespace rdmactor::bench {

const char* to_string(bench_op x) noexcept {
  switch (x) {
    case bench_op::send:
      return "send";
    case bench_op::write:
      return "write";
    case bench_op::read:
      return "read";
    case bench_op::raw:
      return "raw";
    case bench_op::fetch_add:
      return "fetch_add";
    case bench_op::cas:
      return "cas";
    case bench_op::connect:
      return "connect";
    case bench_op::actor:
      return "actor";
  }
  return "unknown";
}

const char* to_string(bench_mode x) noexcept {
  return x == bench_mode::lat ? "lat" : "bw";
}

bool parse_op(const std::string& str, bench_op& out) noexcept {
  for (auto op : {bench_op::send, bench_op::write, bench_op::read,
                  bench_op::raw, bench_op::fetch_add, bench_op::cas,
                  bench_op::connect, bench_op::actor}) {
    if (str == to_string(op)) {
      out = op;
      return true;
    }
  }
  return false;
}

bool parse_mode(const std::string& str, bench_mode& out) noexcept {
  if (str == "lat") {
    out = bench_mode::lat;
    return true;
  }
  if (str == "bw") {
    out = bench_mode::bw;
    return true;
  }
  return false;
}

} // namespace rdmactor::bench
