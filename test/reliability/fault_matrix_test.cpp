#include <boost/test/unit_test.hpp>

// The fault matrix's injected faults (docs/reliability.md): the soft
// fabric drops the connection after N bytes, corrupts frames or delays
// completions (transport/soft/faults.hpp), so these cases run on soft
// only.  Part of reliability_test; the surviving node is
// survivor_fixture.hpp's.

#include "test/reliability/survivor_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;
using namespace std::chrono_literals;

namespace {

/// Outcome of the scenario one connection runs.
struct scenario_result {
  std::vector<std::pair<std::string, caf::error>> ops;
  bool corrupt = false;

  bool all_ok() const {
    for (auto& op : ops)
      if (op.second)
        return false;
    return true;
  }

  std::string summary() const {
    std::string out;
    for (auto& [name, err] : ops)
      out += name + "=" + outcome(err) + " ";
    return out;
  }
};

/// The survivor plus a node whose connections carry the faults.
struct fault_fixture : survivor_fixture {
  std::unique_ptr<node> faulty;
  static constexpr uint8_t data_seed = 5;
  static constexpr uint64_t data_bytes = 200 << 10;
  static constexpr uint64_t region_bytes = 64 << 10;

  fault_fixture() {
    faulty = open(opts);
  }

  ~fault_fixture() {
    faulty->close();
  }

  /// Runs allocate, write, read back, send_data, send_mr and release on
  /// `conn`; every call must be answered (value or error).
  scenario_result run_scenario(const connection_actor& conn) {
    scenario_result res;
    auto note = [&](const char* name, const caf::error& err) {
      BOOST_TEST(answered(err), name << " was not answered: " << render(err));
      res.ops.emplace_back(name, err);
    };
    auto rmr = call<remote_mr>(sys, conn, request_remote_mr_atom::value,
                               region_bytes, uint64_t{64});
    note("alloc", rmr ? caf::error{} : rmr.error());
    auto src = faulty->pool()->allocate(data_bytes, 64, transport::access::all);
    auto dst
        = faulty->pool()->allocate(region_bytes, 64, transport::access::all);
    BOOST_REQUIRE(src && dst);
    fill(*src, data_seed);
    if (rmr) {
      auto head = src->slice(0, region_bytes);
      auto wr = call<uint64_t>(sys, conn, write_atom::value, *head, *rmr);
      note("write", wr ? caf::error{} : wr.error());
      auto rd = call<uint64_t>(sys, conn, read_atom::value, *dst, *rmr);
      note("read", rd ? caf::error{} : rd.error());
      if (rd && !holds_pattern(*dst, data_seed))
        res.corrupt = true;
    }
    auto sd = call<uint64_t>(sys, conn, send_data_atom::value, *src);
    note("send_data", sd ? caf::error{} : sd.error());
    auto sm = call<mr_token>(sys, conn, send_mr_atom::value, *src);
    note("send_mr", sm ? caf::error{} : sm.error());
    if (rmr) {
      auto rel = call<uint64_t>(sys, conn, release_atom::value, *rmr);
      note("release", rel ? caf::error{} : rel.error());
    }
    return res;
  }

  /// Connects `faulty` with `plan` on the side `on_survivor` says, runs
  /// the scenario, closes, and checks: answers, no corrupted byte, the
  /// survivor notices, memory returns on both sides.  Returns the result
  /// and the survivor's report.
  std::pair<scenario_result, std::string>
  run_case(const transport::soft::fault_plan& plan, bool on_survivor,
           const std::string& label, bool fault_free = false) {
    auto& dev = on_survivor ? *survivor->device() : *faulty->device();
    BOOST_REQUIRE(!transport::soft::set_faults(dev, plan));
    auto c = faulty->connect(address());
    BOOST_REQUIRE_MESSAGE(c, label << ": connect: " << render(c));
    auto conn = accept_next();
    BOOST_REQUIRE(!transport::soft::set_faults(dev, {}));
    watch w{sys, conn};
    auto book = spawn_verifier(sys, conn, data_seed);
    auto res = run_scenario(*c);
    BOOST_TEST(!res.corrupt, label << ": read back other bytes");
    // Acknowledged data is queued for the receiving user, who claims it
    // while the connection lives; the agent drops what is left when the
    // connection goes (docs/reliability.md), which a fault may do after
    // the scenario ended.  So only a fault-free run must deliver it all.
    if (fault_free) {
      BOOST_TEST(res.all_ok(), label << ": " << res.summary());
      BOOST_TEST(eventually([&] { return book->bytes == data_bytes; }),
                 label << ": data went missing");
    }
    caf::anon_send_exit(*c, caf::exit_reason::user_shutdown);
    auto reason = w.down(down_bound);
    BOOST_REQUIRE_MESSAGE(reason, label << ": the survivor did not notice");
    BOOST_TEST(eventually([&] { return book->done.load(); }));
    BOOST_TEST(book->corrupt == 0u, label << ": corrupted chunk delivered");
    BOOST_TEST(book->bytes <= data_bytes);
    expect_memory_back(*survivor, label + ": survivor");
    expect_memory_back(*faulty, label + ": faulty node");
    return {res, outcome(*reason)};
  }
};

/// Counts outcomes over many runs, for the log and docs/reliability.md.
struct tally {
  std::map<std::string, int> client;
  std::map<std::string, int> survivor;
  int runs = 0;
  int clean = 0;

  void add(const scenario_result& res, const std::string& report) {
    ++runs;
    if (res.all_ok())
      ++clean;
    for (auto& op : res.ops)
      if (op.second)
        ++client[op.first + ":" + outcome(op.second)];
    ++survivor[report];
  }

  std::string str() const {
    std::ostringstream out;
    out << runs << " runs, " << clean << " without error; client errors:";
    for (auto& [k, v] : client)
      out << " " << k << " x" << v;
    out << "; survivor reports:";
    for (auto& [k, v] : survivor)
      out << " " << k << " x" << v;
    return out.str();
  }
};

/// Byte counts at which to drop: around the 32-byte frame header, then
/// growing by a quarter up to past the scenario's ~330 KB; the last one is
/// never reached.
std::vector<uint64_t> drop_points() {
  std::vector<uint64_t> out{0, 1, 31, 32, 33, 63, 64, 65};
  for (double x = 100; x < 500000; x *= 1.25)
    out.push_back(static_cast<uint64_t>(x));
  out.push_back(1 << 20); // beyond everything: no drop
  return out;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(
    injected_faults, fault_fixture,
    *boost::unit_test::precondition([](boost::unit_test::test_unit_id)
                                        -> boost::test_tools::assertion_result {
      return on_soft();
    }))

BOOST_AUTO_TEST_CASE(connection_dropped_after_n_bytes) {
  for (bool on_survivor : {false, true}) {
    tally t;
    for (auto n : drop_points()) {
      transport::soft::fault_plan plan;
      plan.drop_after_bytes = n;
      auto label = std::string{on_survivor ? "survivor" : "peer"}
                   + " drops after " + std::to_string(n) + " bytes";
      auto [res, report]
          = run_case(plan, on_survivor, label, n == drop_points().back());
      BOOST_TEST_MESSAGE(label << ": " << res.summary()
                               << "| survivor: " << report);
      t.add(res, report);
    }
    BOOST_TEST_MESSAGE((on_survivor ? "survivor" : "peer")
                       << " outbound dropped: " << t.str());
    BOOST_TEST(t.clean >= 1); // the largest N never drops
    BOOST_TEST(t.clean < t.runs);
  }
  expect_serving("after the drops");
}

BOOST_AUTO_TEST_CASE(corrupted_frames) {
  for (bool on_survivor : {false, true}) {
    tally t;
    for (uint64_t k = 1; k <= 24; ++k) {
      transport::soft::fault_plan plan;
      plan.corrupt_frame = k;
      auto label = std::string{on_survivor ? "survivor" : "peer"}
                   + " corrupts frame " + std::to_string(k);
      auto [res, report] = run_case(plan, on_survivor, label);
      BOOST_TEST_MESSAGE(label << ": " << res.summary()
                               << "| survivor: " << report);
      t.add(res, report);
    }
    BOOST_TEST_MESSAGE((on_survivor ? "survivor" : "peer")
                       << " outbound corrupted: " << t.str());
    BOOST_TEST(t.clean < t.runs);
  }
  expect_serving("after the corruption");
}

BOOST_AUTO_TEST_CASE(delayed_completions_within_the_timeout) {
  transport::soft::fault_plan plan;
  plan.delay = 100ms;
  auto [res, report] = run_case(plan, false, "peer delays 100 ms", true);
  BOOST_TEST_MESSAGE("delay 100 ms: " << res.summary());
  BOOST_TEST(res.all_ok(), res.summary());
  auto [res2, report2] = run_case(plan, true, "survivor delays 100 ms", true);
  BOOST_TEST_MESSAGE("survivor delays 100 ms: " << res2.summary());
  BOOST_TEST(res2.all_ok(), res2.summary());
  expect_serving("after the delays");
}

// Keepalive (issue 15): a live peer whose frames all leave 250 ms late
// (less than keepalive-ms = 600) answers every Ping late but in time: it is
// pinged again and again and never dropped, and it drops nobody either.
BOOST_AUTO_TEST_CASE(delayed_completions_below_the_keepalive_bound) {
  auto o = opts;
  o.keepalive_ms = 600;
  auto live = open(o);
  caf::scoped_actor acc{sys};
  auto p = live->listen(host + ":0", caf::actor_cast<caf::actor>(acc));
  BOOST_REQUIRE_MESSAGE(p, render(p));
  auto slow = open(o);
  transport::soft::fault_plan plan;
  plan.delay = 250ms;
  BOOST_REQUIRE(!transport::soft::set_faults(*slow->device(), plan));
  auto c = slow->connect(host + ":" + std::to_string(*p));
  BOOST_REQUIRE_MESSAGE(c, render(c));
  connection_actor here;
  acc->receive([&](accepted_atom, connection_actor& x) { here = x; },
               caf::after(std::chrono::seconds(30)) >> [] {});
  BOOST_REQUIRE(here);
  watch w_here{sys, here};
  watch w_slow{sys, *c};
  // Idle both ways: each end pings the other; the slow one's answers come
  // 250 ms late.
  BOOST_TEST(eventually([&] { return stats_of(here).keepalive_pings >= 6; },
                        std::chrono::seconds(60)));
  BOOST_TEST(stats_of(*c).keepalive_pings >= 1u);
  BOOST_TEST(!w_here.down(std::chrono::milliseconds{0}));
  BOOST_TEST(!w_slow.down(std::chrono::milliseconds{0}));
  round_trip(here, "over the slow link");
  slow->close();
  live->close();
}

BOOST_AUTO_TEST_CASE(delayed_completions_beyond_the_timeout) {
  // A peer with a 1 s request timeout whose frames take 1.5 s to leave.
  auto o = opts;
  o.request_timeout_ms = 1000;
  auto slow = open(o);
  transport::soft::fault_plan plan;
  plan.delay = 1500ms;
  BOOST_REQUIRE(!transport::soft::set_faults(*slow->device(), plan));
  auto c = slow->connect(address());
  BOOST_REQUIRE_MESSAGE(c, render(c));
  auto conn = accept_next();
  watch w{sys, conn};
  auto started = std::chrono::steady_clock::now();
  auto rmr = call<remote_mr>(sys, *c, request_remote_mr_atom::value,
                             region_bytes, uint64_t{64});
  BOOST_REQUIRE(!rmr);
  BOOST_TEST_MESSAGE("AllocMR over a slow link: " << render(rmr.error()));
  BOOST_TEST((std::chrono::steady_clock::now() - started < 10s));
  // The AllocMR still reached the survivor, which allocated the region;
  // the slow peer releases it when the late answer arrives, while the
  // connection lives.
  BOOST_TEST(eventually([&] { return stats_of(conn).owned_mrs == 1; }));
  BOOST_TEST(eventually([&] { return stats_of(conn).owned_mrs == 0; }),
             "the region of the timed-out AllocMR was not released");
  BOOST_TEST(stats_of(*c).pending_requests == 0);
  expect_serving("while a peer answers late");
  caf::anon_send_exit(*c, caf::exit_reason::user_shutdown);
  auto reason = w.down(down_bound);
  BOOST_REQUIRE(reason);
  expect_memory_back(*survivor, "survivor after the slow peer left");
  expect_memory_back(*slow, "slow peer");
  slow->close();
}

BOOST_AUTO_TEST_SUITE_END()
