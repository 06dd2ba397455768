#pragma once

#include <string>

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "rdmactor/errc.hpp"

namespace rdmactor {

/// The CAF error category of every rdmactor error.
constexpr caf::atom_value error_category = caf::atom("rdmactor");

/// Builds a `caf::error` in category `rdmactor` whose context is `what`
/// (a sentence naming the cause and, where it helps, the remedy).
/// `errc::none` becomes `internal_error`: the result is never empty.
caf::error make_error(errc code, std::string what);

/// Builds an error whose context is `describe(code)`.
caf::error make_error(errc code);

/// Returns the rdmactor code of `err`, or `errc::none` for other categories.
errc code_of(const caf::error& err) noexcept;

/// Returns the context string of an rdmactor error (empty otherwise).
std::string what_of(const caf::error& err);

/// The exit reason of a proxy whose connection ended: CAF's
/// `exit_reason::remote_link_unreachable`, as with CAF io, with `cause`
/// (the connection's end: `peer_gone`, `peer_closed`, `closed`) as its
/// context; `cause_of` takes it out again.
caf::error link_unreachable(const caf::error& cause);

/// The rdmactor error inside a reason made by `link_unreachable`
/// (`down_msg::reason` of a proxy); `reason` itself otherwise.
caf::error cause_of(const caf::error& reason);

/// Registers the `rdmactor` error category with `cfg` so that
/// `sys.render(err)` prints "rdmactor: peer_gone (...)".
void register_error_category(caf::actor_system_config& cfg);

/// Renders any error without needing an actor system.
std::string render(const caf::error& err);

/// Renders the error of `x`, or "ok" when it holds a value (never touches
/// the error of a valid `expected`).
template <class T>
std::string render(const caf::expected<T>& x) {
  return x ? std::string{"ok"} : render(x.error());
}

} // namespace rdmactor
