#define BOOST_TEST_MODULE common
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include <caf/actor_system.hpp>
#include <caf/config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/logger.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>
#include <sstream>
#include <string>

#include "common/activation.hpp"
#include "common/fd_limit.hpp"
#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "common/tuning.hpp"
#include "rdmactor/config.hpp"
#include "rdmactor/detail/completion_mode.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/memory_pool.hpp"
#include "rdmactor/options.hpp"
#include "rdmactor/transport/fabric.hpp"
#include "test/actors/log_capture.hpp"

using namespace rdmactor;

BOOST_AUTO_TEST_SUITE(errors)

BOOST_AUTO_TEST_CASE(every_code_has_a_distinct_name_and_a_description) {
  std::set<std::string> names;
  int count = 0;
  for (int i = 1; i < 256; ++i) {
    auto name = std::string{to_string(static_cast<errc>(i))};
    if (name == "unknown_errc")
      continue;
    ++count;
    BOOST_TEST(names.insert(name).second);
    BOOST_TEST(std::string{describe(static_cast<errc>(i))}.size() > 10u);
  }
  BOOST_TEST(count >= 35);
}

BOOST_AUTO_TEST_CASE(make_error_carries_code_and_message) {
  auto err = make_error(errc::peer_gone, "the peer 10.0.0.2:7471 died");
  BOOST_TEST(code_of(err) == errc::peer_gone);
  BOOST_TEST(what_of(err) == "the peer 10.0.0.2:7471 died");
  BOOST_TEST(render(err) == "rdmactor: peer_gone: the peer 10.0.0.2:7471 died");
  BOOST_TEST(code_of(caf::error{}) == errc::none);
  BOOST_TEST(what_of(make_error(errc::closed)) == describe(errc::closed));
}

// A proxy whose connection ended quits with CAF's remote_link_unreachable
// (as with CAF io), and rdmactor's cause travels inside it.
BOOST_AUTO_TEST_CASE(link_unreachable_carries_the_cause) {
  auto cause = make_error(errc::peer_gone, "the peer 10.0.0.2:7471 died");
  auto reason = link_unreachable(cause);
  BOOST_TEST((reason == caf::exit_reason::remote_link_unreachable));
  BOOST_TEST(code_of(reason) == errc::none);
  BOOST_TEST(code_of(cause_of(reason)) == errc::peer_gone);
  BOOST_TEST(what_of(cause_of(reason)) == "the peer 10.0.0.2:7471 died");
  BOOST_TEST(render(reason)
             == "caf: remote_link_unreachable (rdmactor: peer_gone: the peer "
                "10.0.0.2:7471 died)");
  // Anything else is its own cause, an empty error included.
  BOOST_TEST(code_of(cause_of(cause)) == errc::peer_gone);
  BOOST_TEST(!cause_of(caf::error{}));
  auto plain = caf::make_error(caf::exit_reason::remote_link_unreachable);
  BOOST_TEST((cause_of(plain) == caf::exit_reason::remote_link_unreachable));
}

BOOST_AUTO_TEST_CASE(work_completion_statuses_map_to_codes) {
  using transport::wc_status;
  BOOST_TEST(transport::to_errc(wc_status::success) == errc::none);
  BOOST_TEST(transport::to_errc(wc_status::remote_access_error)
             == errc::remote_access_error);
  BOOST_TEST(transport::to_errc(wc_status::work_request_flushed)
             == errc::work_request_flushed);
  BOOST_TEST(transport::to_errc(wc_status::rnr_retry_exceeded)
             == errc::rnr_retry_exceeded);
  BOOST_TEST(transport::to_errc(wc_status::general_error)
             == errc::completion_error);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(configuration)

BOOST_AUTO_TEST_CASE(defaults_are_valid_and_ranges_are_checked) {
  options o;
  BOOST_TEST(validate(o).empty());
  o.fabric = "ethernet";
  BOOST_TEST(validate(o).find("rdmactor.fabric") != std::string::npos);
  o = options{};
  o.max_message_len_bytes = 100;
  BOOST_TEST(validate(o).find("max-message-len-bytes") != std::string::npos);
  o = options{};
  o.recv_depth = 1;
  BOOST_TEST(validate(o).find("recv-depth") != std::string::npos);
  o = options{};
  o.eager_message_len_bytes = 100;
  BOOST_TEST(validate(o).find("eager-message-len-bytes") != std::string::npos);
  o = options{};
  o.max_rendezvous_bytes
      = o.eager_message_len_bytes - 1; // below an eager chunk
  BOOST_TEST(validate(o).find("max-rendezvous-bytes") != std::string::npos);
  o.max_rendezvous_bytes = (1u << 30) + 1;
  BOOST_TEST(validate(o).find("max-rendezvous-bytes") != std::string::npos);
  o.eager_message_len_bytes = o.max_message_len_bytes; // rendezvous off
  BOOST_TEST(validate(o).empty());
  o = options{};
  o.verbs_mtu_bytes = 1500;
  BOOST_TEST(validate(o).find("verbs-mtu-bytes") != std::string::npos);
  o = options{};
  o.request_timeout_ms = 0;
  BOOST_TEST(!validate(o).empty());
  o = options{};
  o.completion_mode = "spin";
  BOOST_TEST(validate(o).find("completion-mode") != std::string::npos);
  o = options{};
  o.poll_budget_us = 2000000;
  BOOST_TEST(validate(o).find("poll-budget-us") != std::string::npos);
  o = options{};
  o.peer_max_noise = 0;
  BOOST_TEST(validate(o).find("peer-max-") != std::string::npos);
  o = options{};
  o.peer_max_claim_bytes = 0;
  BOOST_TEST(validate(o).find("peer-max-claim-bytes") != std::string::npos);
  o = options{};
  o.peer_noise_window_ms = 0;
  BOOST_TEST(validate(o).find("peer-noise-window-ms") != std::string::npos);
  o = options{};
  o.peer_log_window_ms = 0;
  BOOST_TEST(validate(o).find("peer-log-window-ms") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(completion_modes_parse_and_print_round_trip) {
  using transport::completion_mode;
  for (auto m : {completion_mode::event, completion_mode::busy,
                 completion_mode::adaptive}) {
    auto parsed = transport::parse_completion_mode(transport::to_string(m));
    BOOST_REQUIRE(parsed);
    BOOST_TEST((*parsed == m));
  }
  BOOST_TEST(!transport::parse_completion_mode("polling"));
  // The option's default is what the transport defaults to.
  BOOST_TEST((transport::parse_completion_mode(options{}.completion_mode)
              == transport::polling{}.mode));
  BOOST_TEST(options{}.poll_budget_us == transport::polling{}.poll_budget_us);
}

BOOST_AUTO_TEST_CASE(adaptive_polls_only_where_polling_pays) {
  options o;
  o.fabric = "soft";
  auto dev = transport::open_device(o);
  BOOST_REQUIRE(dev);
  // Soft's polling owner reads its socket itself: polling pays there.
  BOOST_TEST((*dev)->polling_pays());
  using transport::completion_mode;
  auto how = transport::polling_of(o);
  BOOST_TEST((how.mode == completion_mode::adaptive));
  auto kept = transport::effective_polling(**dev, how);
  BOOST_TEST((kept.mode == completion_mode::adaptive));
  BOOST_TEST(kept.poll_budget_us == o.poll_budget_us);
  // Where polling does not pay, adaptive waits for events; explicit modes
  // stay as they are.
  struct threads_only {
    bool polling_pays() const noexcept {
      return false;
    }
  };
  BOOST_TEST((transport::effective_polling(threads_only{}, how).mode
              == completion_mode::event));
  how.mode = completion_mode::busy;
  BOOST_TEST((transport::effective_polling(threads_only{}, how).mode
              == completion_mode::busy));
}

BOOST_AUTO_TEST_CASE(rdmactor_config_bounds_max_throughput) {
  rdmactor::config cfg;
  auto n = caf::get_or(cfg, "scheduler.max-throughput", size_t{0});
  BOOST_TEST(n == size_t(rdmactor::config::default_max_throughput));
  // ... and CAF's scheduler takes it.
  caf::actor_system sys{cfg};
  BOOST_TEST(sys.scheduler().max_throughput()
             == size_t(rdmactor::config::default_max_throughput));
}

BOOST_AUTO_TEST_CASE(
    rdmactor_config_sets_the_workers_sleeps_and_users_override) {
  rdmactor::config cfg;
  using ns = std::chrono::nanoseconds;
  auto moderate = caf::get_or(cfg, "work-stealing.moderate-sleep-duration",
                              caf::timespan{ns{-1}});
  BOOST_TEST(moderate.count() == rdmactor::config::default_moderate_sleep_ns);
  auto relaxed = caf::get_or(cfg, "work-stealing.relaxed-sleep-duration",
                             caf::timespan{ns{-1}});
  BOOST_TEST(relaxed.count() == rdmactor::config::default_relaxed_sleep_ns);
  // The command line (and the ini file) win over these defaults.
  rdmactor::config custom;
  std::vector<std::string> args{"--work-stealing.relaxed-sleep-duration=10ms"};
  std::istringstream no_ini;
  BOOST_REQUIRE(!custom.parse(args, no_ini));
  relaxed = caf::get_or(custom, "work-stealing.relaxed-sleep-duration",
                        caf::timespan{ns{-1}});
  BOOST_TEST(relaxed.count() == 10'000'000);
}

BOOST_AUTO_TEST_CASE(addresses_parse_or_fail_with_invalid_address) {
  auto a = transport::parse_address("10.0.0.2:7471");
  BOOST_REQUIRE(a);
  BOOST_TEST(a->first == "10.0.0.2");
  BOOST_TEST(a->second == 7471);
  auto b = transport::parse_address("[::1]:80");
  BOOST_REQUIRE(b);
  BOOST_TEST(b->first == "::1");
  for (auto bad :
       {"host", "host:", ":80", "host:99999", "host:12a", "[::1:80", ""}) {
    auto r = transport::parse_address(bad);
    BOOST_TEST_CONTEXT(bad) {
      BOOST_REQUIRE(!r);
      BOOST_TEST(code_of(r.error()) == errc::invalid_address);
    }
  }
}

BOOST_AUTO_TEST_CASE(unknown_fabric_is_an_error_value) {
  options o;
  o.fabric = "carrier-pigeon";
  auto dev = transport::open_device(o);
  BOOST_REQUIRE(!dev);
  BOOST_TEST(code_of(dev.error()) == errc::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

struct pool_fixture {
  transport::device_ptr dev;
  memory_pool_ptr pool;
  static constexpr uint64_t arena = 64 * 1024;

  pool_fixture() {
    options o;
    o.fabric = "soft";
    auto d = transport::open_device(o);
    BOOST_REQUIRE_MESSAGE(d, render(d));
    dev = *d;
    pool = std::make_shared<memory_pool>(dev, arena, 1 << 24);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(memory_pool_suite, pool_fixture)

BOOST_AUTO_TEST_CASE(alignment_zeroing_and_accounting) {
  constexpr auto rw = transport::access::all;
  {
    auto a = pool->allocate(10, 8, rw);
    auto b = pool->allocate(100, 1024, rw);
    BOOST_REQUIRE(a);
    BOOST_REQUIRE(b);
    BOOST_TEST(a->size() == 10u);
    BOOST_TEST(b->addr() % 1024 == 0u);
    BOOST_TEST(b->data()[99] == 0);
    std::memset(b->data(), 0xab, b->size());
    auto s = pool->stats();
    BOOST_TEST(s.allocations == 2u);
    BOOST_TEST(s.bytes_in_use == 64u + 128u);
    BOOST_TEST(s.arenas == 1u);
  }
  BOOST_TEST(pool->stats().bytes_in_use == 0u);
  BOOST_TEST(pool->stats().allocations == 0u);
  // Reused memory comes back zeroed.
  auto c = pool->allocate(100, 1024, rw);
  BOOST_REQUIRE(c);
  BOOST_TEST(c->data()[0] == 0);
}

BOOST_AUTO_TEST_CASE(frees_coalesce_so_the_whole_arena_fits_again) {
  constexpr auto rw = transport::access::all;
  std::vector<local_mr> parts;
  for (int i = 0; i < 16; ++i) {
    auto p = pool->allocate(arena / 16, 64, rw);
    BOOST_REQUIRE(p);
    parts.push_back(*p);
  }
  BOOST_TEST(pool->stats().arenas == 1u);
  // Free in an interleaved order, then take the arena in one piece.
  for (int i = 0; i < 16; i += 2)
    parts[i] = local_mr{};
  for (int i = 1; i < 16; i += 2)
    parts[i] = local_mr{};
  auto whole = pool->allocate(arena, 64, rw);
  BOOST_REQUIRE(whole);
  BOOST_TEST(pool->stats().arenas == 1u);
}

BOOST_AUTO_TEST_CASE(large_allocations_get_their_own_registration) {
  {
    auto big = pool->allocate(arena * 3 + 1, 64, transport::access::all);
    BOOST_REQUIRE(big);
    BOOST_TEST(pool->stats().arenas == 1u);
    BOOST_TEST(pool->stats().registered_bytes >= arena * 3 + 1);
  }
  BOOST_TEST(pool->stats().arenas == 0u);
  BOOST_TEST(pool->stats().registered_bytes == 0u);
}

BOOST_AUTO_TEST_CASE(dedicated_allocations_have_an_rkey_of_their_own) {
  constexpr auto rw
      = transport::access::local_write | transport::access::remote_write;
  {
    auto shared = pool->allocate(64, 64, rw);
    auto a = pool->allocate_dedicated(100, rw);
    auto b = pool->allocate_dedicated(100, rw);
    BOOST_REQUIRE(shared);
    BOOST_REQUIRE(a);
    BOOST_REQUIRE(b);
    // Small enough for the shared arena, yet each has its registration.
    BOOST_TEST(pool->stats().arenas == 3u);
    BOOST_TEST(a->rkey() != shared->rkey());
    BOOST_TEST(a->rkey() != b->rkey());
    BOOST_TEST(a->addr() % memory_pool::arena_align_bytes == 0u);
    BOOST_TEST(a->size() == 100u);
    BOOST_TEST(a->data()[99] == 0);
    BOOST_TEST(code_of(pool->allocate_dedicated((1 << 24) + 1, rw).error())
               == errc::size_limit);
  }
  BOOST_TEST(pool->stats().arenas == 1u); // the shared one stays
  BOOST_TEST(pool->stats().bytes_in_use == 0u);
}

BOOST_AUTO_TEST_CASE(access_flag_sets_use_separate_arenas) {
  auto a = pool->allocate(64, 64, transport::access::local_write);
  auto b = pool->allocate(64, 64, transport::access::all);
  BOOST_REQUIRE(a);
  BOOST_REQUIRE(b);
  BOOST_TEST(pool->stats().arenas == 2u);
  BOOST_TEST(a->rkey() != b->rkey());
}

BOOST_AUTO_TEST_CASE(peer_allocations_never_share_arenas_with_user_ones) {
  // Same flags, different owners: an rkey lent for an AllocMR region must
  // not open user memory.
  auto user = pool->allocate(64, 64, transport::access::all);
  auto peer = pool->allocate(64, 64, transport::access::all, true,
                             memory_pool::owner::peers);
  auto peer2 = pool->allocate(64, 64, transport::access::all, true,
                              memory_pool::owner::peers);
  BOOST_REQUIRE(user);
  BOOST_REQUIRE(peer);
  BOOST_REQUIRE(peer2);
  BOOST_TEST(pool->stats().arenas == 2u);
  BOOST_TEST(user->rkey() != peer->rkey());
  BOOST_TEST(peer->rkey() == peer2->rkey());
}

BOOST_AUTO_TEST_CASE(invalid_layouts_are_refused) {
  BOOST_TEST(code_of(pool->allocate(8, 0, 0).error()) == errc::invalid_layout);
  BOOST_TEST(code_of(pool->allocate(8, 12, 0).error()) == errc::invalid_layout);
  BOOST_TEST(code_of(pool->allocate((1 << 24) + 1, 8, 0).error())
             == errc::size_limit);
  BOOST_TEST(pool->stats().bytes_in_use == 0u);
}

BOOST_AUTO_TEST_CASE(slices_share_the_block_and_check_bounds) {
  auto mr = pool->allocate(1000, 64, transport::access::all);
  BOOST_REQUIRE(mr);
  auto s = mr->slice(100, 200);
  BOOST_REQUIRE(s);
  BOOST_TEST(s->addr() == mr->addr() + 100);
  BOOST_TEST(s->size() == 200u);
  BOOST_TEST(s->token().rkey == mr->rkey());
  BOOST_TEST(code_of(mr->slice(900, 101).error()) == errc::out_of_bounds);
  BOOST_TEST(code_of(mr->slice(1001, 0).error()) == errc::out_of_bounds);
  auto empty = mr->slice(1000, 0);
  BOOST_TEST(static_cast<bool>(empty));
  mr = caf::expected<local_mr>{local_mr{}};
  BOOST_TEST(pool->stats().bytes_in_use > 0u); // the slice keeps it
  s = caf::expected<local_mr>{local_mr{}};
  empty = caf::expected<local_mr>{local_mr{}};
  BOOST_TEST(pool->stats().bytes_in_use == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

// -- the rate limiter of log lines and protocol noise -------------------------

BOOST_AUTO_TEST_SUITE(rate_limiting)

using std::chrono::milliseconds;

BOOST_AUTO_TEST_CASE(admits_the_budget_per_window_and_counts_the_rest) {
  rate_limiter limit{3, milliseconds{100}};
  auto t0 = rate_limiter::clock_type::now();
  int admitted = 0;
  for (int i = 0; i < 10; ++i)
    if (limit.take(t0 + milliseconds{i}))
      ++admitted;
  BOOST_TEST(admitted == 3);
  BOOST_TEST(limit.used() == 3u);
  // Still the first window.
  BOOST_TEST(!limit.take(t0 + milliseconds{99}));
  // The next window's first event reports the 8 denied ones, once.
  auto v = limit.take(t0 + milliseconds{100});
  BOOST_TEST(v.admitted);
  BOOST_TEST(v.denied_before == 8u);
  v = limit.take(t0 + milliseconds{101});
  BOOST_TEST(v.admitted);
  BOOST_TEST(v.denied_before == 0u);
  // An earlier time (another thread's) counts into the current window.
  BOOST_TEST(limit.take(t0).admitted);
  BOOST_TEST(!limit.take(t0).admitted);
}

BOOST_AUTO_TEST_CASE(denied_events_are_handed_over_once) {
  rate_limiter limit{1, milliseconds{1000}};
  auto t0 = rate_limiter::clock_type::now();
  BOOST_TEST(limit.take(t0).admitted);
  BOOST_TEST(!limit.take(t0).admitted);
  limit.add_denied(5);
  BOOST_TEST(limit.take_denied() == 6u);
  BOOST_TEST(limit.take_denied() == 0u);
  limit.reset(2, milliseconds{10});
  BOOST_TEST(limit.used() == 0u);
  BOOST_TEST(limit.take(t0).admitted);
  BOOST_TEST(limit.take(t0).admitted);
  BOOST_TEST(!limit.take(t0).admitted);
}

BOOST_AUTO_TEST_CASE(a_zero_budget_denies_everything) {
  rate_limiter limit{0, milliseconds{10}};
  auto t0 = rate_limiter::clock_type::now();
  BOOST_TEST(!limit.take(t0).admitted);
  BOOST_TEST(!limit.take(t0 + milliseconds{20}).admitted);
  BOOST_TEST(limit.take_denied() == 2u);
}

BOOST_AUTO_TEST_CASE(shared_budgets_are_one_per_name_and_notes_read_well) {
  BOOST_TEST(&shared_log_budget("a-test") == &shared_log_budget("a-test"));
  BOOST_TEST(&shared_log_budget("a-test") != &shared_log_budget("b-test"));
  BOOST_TEST(suppressed_note(0).empty());
  BOOST_TEST(suppressed_note(1) == " (1 similar line suppressed)");
  BOOST_TEST(suppressed_note(30000) == " (30000 similar lines suppressed)");
}

// The lines a connection's start or end writes (log_within): at most the
// shared budget's, at the level asked for, the first after a pause with
// the note; a level the log filters spends nothing.
BOOST_AUTO_TEST_CASE(log_within_writes_at_most_the_shared_budget) {
  test::log_capture logs;
  auto& shared = shared_log_budget("log-within-test");
  shared.reset(3, std::chrono::minutes(1));
  auto saved = log().level();
  log().set_level(spdlog::level::info);
  size_t written = 0;
  for (int i = 0; i < 100; ++i)
    written += log_within("log-within-test", spdlog::level::err,
                          "connection " + std::to_string(i) + " failed")
                   ? 1
                   : 0;
  BOOST_TEST(written == 3u);
  BOOST_TEST(logs.lines->count(spdlog::level::err, "failed") == 3u);
  BOOST_TEST(shared.take_denied() == 97u);
  // Filtered: no budget spent, nothing written.
  BOOST_TEST(!log_within("log-within-test", spdlog::level::debug, "quiet"));
  BOOST_TEST(shared.take_denied() == 0u);
  // A new window: the first line says what was held back.
  shared.reset(1, std::chrono::minutes(1));
  shared.add_denied(7);
  BOOST_TEST(warn_within("log-within-test", "again"));
  BOOST_TEST(logs.lines->count(spdlog::level::warn,
                               "again (7 similar lines suppressed)")
             == 1u);
  log().set_level(saved);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(open_files)

BOOST_AUTO_TEST_CASE(the_soft_limit_rises_to_the_wanted_value_and_never_falls) {
  rlimit lim{};
  BOOST_REQUIRE(::getrlimit(RLIMIT_NOFILE, &lim) == 0);
  auto saved = lim;
  auto hard = lim.rlim_max;
  auto low = std::min<rlim_t>(hard, 256);
  lim.rlim_cur = low;
  BOOST_REQUIRE(::setrlimit(RLIMIT_NOFILE, &lim) == 0);
  auto want = std::min<rlim_t>(hard, 512);
  auto x = raise_open_files_limit(512);
  BOOST_TEST(x.before == low);
  BOOST_TEST(x.after == want);
  BOOST_TEST(x.hard == hard);
  // Never lowers.
  auto y = raise_open_files_limit(64);
  BOOST_TEST(y.before == want);
  BOOST_TEST(y.after == want);
  BOOST_REQUIRE(::getrlimit(RLIMIT_NOFILE, &lim) == 0);
  BOOST_TEST(lim.rlim_cur == want);
  ::setrlimit(RLIMIT_NOFILE, &saved);
}

BOOST_AUTO_TEST_CASE(running_out_of_descriptors_says_which_limit_and_how) {
  auto emfile = describe_fd_error(EMFILE);
  BOOST_TEST(emfile.find("RLIMIT_NOFILE") != std::string::npos, emfile);
  BOOST_TEST(emfile.find("ulimit -n") != std::string::npos, emfile);
  auto enfile = describe_fd_error(ENFILE);
  BOOST_TEST(enfile.find("fs.file-max") != std::string::npos, enfile);
  BOOST_TEST(describe_fd_error(ECONNREFUSED) == std::strerror(ECONNREFUSED));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(activation)

using caf::resumable;

/// A fake actor: `resume(ctx, 1)` results in order, then resume_later.
struct fake_actor {
  std::vector<resumable::resume_result> results;
  size_t resumed = 0;
  size_t asked = 0;

  resumable::resume_result resume_one() {
    return resumed < results.size() ? results[resumed++]
                                    : (++resumed, resumable::resume_later);
  }
};

BOOST_AUTO_TEST_CASE(an_activation_ends_after_the_message_that_asks_to_yield) {
  fake_actor a;
  auto res = run_activation(
      8, [&] { return a.resume_one(); }, [&] { return ++a.asked == 3; });
  BOOST_TEST(res == resumable::resume_later);
  BOOST_TEST(a.resumed == 3u); // not 8: the worker runs others first
}

BOOST_AUTO_TEST_CASE(without_a_yield_it_runs_max_throughput_messages) {
  fake_actor a;
  auto res = run_activation(
      8, [&] { return a.resume_one(); }, [&] { return ++a.asked, false; });
  BOOST_TEST(res == resumable::resume_later);
  BOOST_TEST(a.resumed == 8u);
  BOOST_TEST(a.asked == 8u);
}

BOOST_AUTO_TEST_CASE(a_dry_mailbox_or_an_end_returns_at_once_unasked) {
  for (auto last : {resumable::awaiting_message, resumable::done}) {
    fake_actor a;
    a.results = {resumable::resume_later, last};
    auto res = run_activation(
        8, [&] { return a.resume_one(); }, [&] { return ++a.asked, false; });
    BOOST_TEST(res == last);
    BOOST_TEST(a.resumed == 2u);
    // Asked after the first message only: after awaiting_message another
    // worker may run the actor, after done its state is gone.
    BOOST_TEST(a.asked == 1u);
  }
}

#if CAF_LOG_LEVEL == CAF_LOG_LEVEL_QUIET
BOOST_AUTO_TEST_CASE(an_activation_detaches_its_thread_from_cafs_logger) {
  // libcaf logs nothing here, yet tags every activation for its logger
  // while the thread has one (a mutex and a hash map per activation).
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  bool before = false;
  bool after = true;
  std::thread worker{[&] {
    caf::logger::set_current_actor_system(&sys); // as a CAF worker starts
    before = caf::logger::current_logger() != nullptr;
    fake_actor a;
    run_activation(
        1, [&] { return a.resume_one(); }, [] { return false; });
    after = caf::logger::current_logger() != nullptr;
  }};
  worker.join();
  BOOST_TEST(before);
  BOOST_TEST(!after);
}
#endif

BOOST_AUTO_TEST_CASE(the_agent_yields_after_about_one_large_message) {
  // Below it, small messages never end an activation early (8 per
  // activation at the default max-throughput); at it, a 64 KiB message
  // does.
  BOOST_TEST(tuning::agent_yield_after_bytes == size_t{64} << 10);
  BOOST_TEST(tuning::agent_yield_after_bytes
             > size_t(rdmactor::config::default_max_throughput) * 4096);
}

BOOST_AUTO_TEST_SUITE_END()
