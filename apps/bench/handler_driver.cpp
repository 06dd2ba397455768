#include "apps/bench/handler_driver.hpp"

#include <memory>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include "rdmactor/error.hpp"

namespace rdmactor::bench {

namespace {

using clock_type = run_progress::clock_type;

/// What both loops share: the run, and the driver to end with it.
class loop_handler : public data_handler {
public:
  loop_handler(run_progress run, caf::actor_addr driver)
      : run_(std::move(run)), driver_(std::move(driver)) {}

  void on_detach(const caf::error& reason) override {
    fail(reason ? reason
                : make_error(errc::closed,
                             "the bench's loop handler was replaced"));
  }

protected:
  /// Counts one completed operation of `sample_us`; false when the run is
  /// over (the driver is told).
  bool complete(double sample_us) {
    run_.complete(sample_us);
    if (!run_.all_completed())
      return true;
    run_.finish_if_done();
    stop_driver();
    return false;
  }

  void fail(caf::error err) {
    if (run_.fail(std::move(err)))
      stop_driver();
  }

  void stop_driver() {
    if (auto d = caf::actor_cast<caf::actor>(driver_))
      caf::anon_send_exit(d, caf::exit_reason::user_shutdown);
  }

  run_progress run_;

private:
  caf::actor_addr driver_;
};

/// send lat: ping-pong from the client's connection.
class ping_loop final : public loop_handler {
public:
  ping_loop(run_progress run, local_mr ping, caf::actor_addr driver)
      : loop_handler(std::move(run), std::move(driver)),
        ping_(std::move(ping)) {
    // The driver's first ping, sent once we are subscribed.
    run_.issued();
    t_op_ = clock_type::now();
  }

  void on_data(data_context& ctx, local_mr chunk) override {
    if (run_.done())
      return;
    echo_bytes_ += chunk.size();
    if (echo_bytes_ < run_.spec().size)
      return;
    if (!complete(run_progress::micros_since(t_op_) / 2))
      return;
    echo_bytes_ = 0;
    run_.issued();
    t_op_ = clock_type::now();
    // No callback: a failed ping ends the connection, and with it this
    // handler (on_detach).
    ctx.send_data(ping_);
  }

private:
  local_mr ping_;
  uint64_t echo_bytes_ = 0;
  clock_type::time_point t_op_;
};

/// write or read (lat and bw), send bw: `window` operations in flight (1
/// in lat mode), each completion issuing the next.
class op_loop final : public loop_handler,
                      public std::enable_shared_from_this<op_loop> {
public:
  op_loop(run_progress run, local_mr local, remote_mr remote,
          caf::actor_addr driver)
      : loop_handler(std::move(run), std::move(driver)),
        local_(std::move(local)), remote_(std::move(remote)) {}

  void on_attach(data_context& ctx) override {
    auto window = run_.spec().mode == bench_mode::lat ? 1u : run_.spec().window;
    for (uint32_t i = 0; i < window && run_.more_to_issue(); ++i)
      issue(ctx);
  }

  void on_data(data_context&, local_mr) override {
    // The server drops what a bw run sends (sink_flag).
  }

private:
  void issue(data_context& ctx) {
    run_.issued();
    auto t0 = clock_type::now();
    // The callback keeps us alive: it may run after we were detached.
    auto done
        = [self = shared_from_this(), &ctx, t0](caf::expected<uint64_t> r) {
            self->on_done(ctx, t0, std::move(r));
          };
    switch (run_.spec().op) {
      case bench_op::write:
        ctx.write(local_, remote_, std::move(done));
        break;
      case bench_op::read:
        ctx.read(local_, remote_, std::move(done));
        break;
      default:
        ctx.send_data(local_, std::move(done));
    }
  }

  void on_done(data_context& ctx, clock_type::time_point t0,
               caf::expected<uint64_t> r) {
    if (run_.done())
      return;
    if (!r) {
      fail(std::move(r.error()));
      return;
    }
    if (complete(run_progress::micros_since(t0)) && run_.more_to_issue())
      issue(ctx);
  }

  local_mr local_;
  remote_mr remote_;
};

} // namespace

bool runs_in_handler(const run_spec& spec) {
  return spec.in_handler
         && (spec.op == bench_op::send || spec.op == bench_op::write
             || spec.op == bench_op::read);
}

data_handler_ptr make_loop_handler(run_progress run, local_mr local,
                                   remote_mr remote, caf::actor_addr driver) {
  if (run.spec().op == bench_op::send && run.spec().mode == bench_mode::lat)
    return std::make_shared<ping_loop>(std::move(run), std::move(local),
                                       std::move(driver));
  return std::make_shared<op_loop>(std::move(run), std::move(local),
                                   std::move(remote), std::move(driver));
}

} // namespace rdmactor::bench
