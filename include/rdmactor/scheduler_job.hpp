#pragma once

// What CAF's scheduler queues for an actor that runs often, in place of
// the actor itself; for the actors of a hot path (the agents of rdmactor,
// and users' actors that call connections in a loop).  See
// docs/data-handlers.md, "Actors on a hot path".

#include <cstddef>
#include <utility>

#include <caf/actor_config.hpp>
#include <caf/actor_system.hpp>
#include <caf/detail/init_fun_factory.hpp>
#include <caf/detail/spawnable.hpp>
#include <caf/detail/sync_request_bouncer.hpp>
#include <caf/execution_unit.hpp>
#include <caf/infer_handle.hpp>
#include <caf/intrusive/inbox_result.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/monitorable_actor.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>
#include <caf/spawn_options.hpp>

namespace rdmactor {

/// A scheduled actor (`Base`, e.g. a `caf::stateful_actor`) that CAF's
/// scheduler queues and runs through a small job of its own instead of the
/// actor itself.
///
/// Why: CAF's worker casts every job it takes to `abstract_actor*` for its
/// logger's actor id (`dynamic_cast`, also where libcaf logs nothing).
/// For an actor, a cross cast through its whole class hierarchy (a dozen
/// CAF bases and mixins, each compared by name): about 1.3 k instructions
/// per activation, the largest single cost of an agent's activation in the
/// Soft-RoCE VM (docs/benchmarks.md, "CAF's cast per activation").  The job
/// derives from `caf::resumable` alone, so the cast fails at once; its
/// `resume` is the actor's `resume`.
///
/// The actor schedules the job wherever CAF would schedule the actor:
/// `launch`, `enqueue` of a message that unblocks the mailbox, and
/// `schedule_job` (a wake without a message, see direct_poll.hpp).  A job
/// CAF re-queues after `resume_later` stays the job.  Anything else that
/// queues the actor itself still works (it only pays the cast).  The job's
/// reference count is the actor's (strong references of its control
/// block): a queued job keeps the actor alive, as a queued actor does.
/// At scheduler shutdown a still-queued job is only released (its subtype
/// is `unspecified`); the actor cleans up when its last reference goes.
///
/// Use: derive a class-based actor from `with_scheduler_job<Base>` instead
/// of `Base` (e.g. `caf::event_based_actor`, `caf::stateful_actor<S>`, a
/// `caf::typed_event_based_actor<...>`) and spawn it as usual; for a
/// function-based actor, `spawn_with_scheduler_job`.  Nothing else
/// changes: messages, requests, timeouts, monitors and exits are CAF's.
/// Detached actors (`caf::detached`) run on their own thread as in CAF.
/// An actor that overrides `launch`, `enqueue` or `resume` calls this
/// class's versions (`resume`: `Base::resume` is what the job runs).
template <class Base>
class with_scheduler_job : public Base {
public:
  template <class... Ts>
  explicit with_scheduler_job(caf::actor_config& cfg, Ts&&... xs)
      : Base(cfg, std::forward<Ts>(xs)...), job_(this) {}

  /// Queues the job, holding a reference for the scheduler (released by
  /// the worker after an activation that ends in `awaiting_message` or
  /// `done`).  Called by whoever unblocked the mailbox, on any thread;
  /// `eu`: the calling worker, or nullptr off the scheduler's threads.
  /// Only a worker of this actor's own system takes the job: a sender in
  /// another actor system of the process (two nodes in one process) would
  /// otherwise run it on its workers, and after this actor's system went
  /// (a hidden actor outlives it) resume it there against a dead system
  /// (seen as a SIGSEGV in local_actor::cleanup -> actor_system::clock).
  void schedule_job(caf::execution_unit* eu) {
    this->intrusive_ptr_add_ref_impl();
    if (eu != nullptr && &eu->system() == &this->home_system())
      eu->exec_later(&job_);
    else
      this->home_system().scheduler().enqueue(&job_);
  }

  /// CAF's `scheduled_actor::launch`, but the first activation is the
  /// job's: launched lazily (the mailbox blocked), then unblocked here
  /// unless a message came first and did that.
  void launch(caf::execution_unit* eu, bool lazy, bool hide) override {
    Base::launch(eu, true, hide);
    if (!lazy && !this->getf(caf::abstract_actor::is_detached_flag)
        && this->mailbox().try_unblock())
      schedule_job(eu);
  }

  /// CAF's `scheduled_actor::enqueue`, scheduling the job.  Called by
  /// senders on any thread.
  void enqueue(caf::mailbox_element_ptr ptr, caf::execution_unit* eu) override {
    if (this->getf(caf::abstract_actor::is_detached_flag)) {
      Base::enqueue(std::move(ptr), eu);
      return;
    }
    auto mid = ptr->mid;
    auto sender = ptr->sender;
    switch (this->mailbox().push_back(std::move(ptr))) {
      case caf::intrusive::inbox_result::unblocked_reader:
        schedule_job(eu);
        break;
      case caf::intrusive::inbox_result::queue_closed:
        // Terminated: a request gets its error answer, as from CAF.  The
        // locked read of the exit reason (we run on the sender's thread).
        if (mid.is_request())
          caf::detail::sync_request_bouncer{
              this->caf::monitorable_actor::fail_state()}(sender, mid);
        break;
      case caf::intrusive::inbox_result::success:
        break; // scheduled or running already
    }
  }

private:
  /// Forwards everything to the actor's own `resumable` side.
  class job final : public caf::resumable {
  public:
    explicit job(caf::resumable* owner) noexcept : owner_(owner) {}

    subtype_t subtype() const override {
      return unspecified; // never static_cast to an actor (CAF's shutdown)
    }

    resume_result resume(caf::execution_unit* ctx,
                         size_t max_throughput) override {
      return owner_->resume(ctx, max_throughput);
    }

    void intrusive_ptr_add_ref_impl() override {
      owner_->intrusive_ptr_add_ref_impl();
    }

    void intrusive_ptr_release_impl() override {
      // May destroy the actor, and this job with it: nothing after.
      owner_->intrusive_ptr_release_impl();
    }

  private:
    caf::resumable* owner_;
  };

  job job_;
};

/// Spawns the function-based actor `fun(self, xs...)` as CAF's
/// `sys.spawn(fun, xs...)` would, run through a scheduler job
/// (`with_scheduler_job` around the actor class CAF infers from `fun`'s
/// first argument: `caf::event_based_actor*`, `caf::stateful_actor<S>*`,
/// a typed actor's pointer).  Returns the same handle type as CAF's spawn.
/// Any thread.
template <caf::spawn_options Os = caf::no_spawn_options, class F, class... Ts>
caf::infer_handle_from_fun_t<F> spawn_with_scheduler_job(caf::actor_system& sys,
                                                         F fun, Ts&&... xs) {
  using impl = with_scheduler_job<caf::infer_impl_from_fun_t<F>>;
  static_assert(caf::detail::spawnable<F, impl, Ts...>(),
                "cannot spawn function-based actor with given arguments");
  caf::actor_config cfg;
  caf::detail::init_fun_factory<impl, F> fac;
  cfg.init_fun = fac(std::move(fun), std::forward<Ts>(xs)...);
  return sys.spawn_impl<impl, Os>(cfg);
}

} // namespace rdmactor
