#include "rdmactor/error.hpp"

#include <caf/exit_reason.hpp>
#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace rdmactor {

caf::error make_error(errc code, std::string what) {
  // A code of 0 would make an empty caf::error, i.e. "no error": a failure
  // must never read as success.
  if (code == errc::none)
    code = errc::internal_error;
  return caf::error{static_cast<uint8_t>(code), error_category,
                    caf::make_message(std::move(what))};
}

caf::error make_error(errc code) {
  return make_error(code, describe(code));
}

errc code_of(const caf::error& err) noexcept {
  if (!err || err.category() != error_category)
    return errc::none;
  return static_cast<errc>(err.code());
}

std::string what_of(const caf::error& err) {
  if (!err || err.category() != error_category)
    return {};
  auto& ctx = err.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return {};
}

caf::error link_unreachable(const caf::error& cause) {
  return caf::error{
      static_cast<uint8_t>(caf::exit_reason::remote_link_unreachable),
      caf::atom("exit"), caf::make_message(cause)};
}

caf::error cause_of(const caf::error& reason) {
  // CAF 0.17 reads an empty error's category through a null pointer.
  if (reason && reason.category() == caf::atom("exit")
      && reason.code()
             == static_cast<uint8_t>(caf::exit_reason::remote_link_unreachable)
      && reason.context().match_elements<caf::error>())
    return reason.context().get_as<caf::error>(0);
  return reason;
}

void register_error_category(caf::actor_system_config& cfg) {
  cfg.add_error_category(error_category,
                         [](uint8_t code, caf::atom_value,
                            const caf::message& ctx) -> std::string {
                           std::string out = "rdmactor: ";
                           out += to_string(static_cast<errc>(code));
                           if (ctx.size() == 1
                               && ctx.match_element<std::string>(0)) {
                             out += ": ";
                             out += ctx.get_as<std::string>(0);
                           }
                           return out;
                         });
}

std::string render(const caf::error& err) {
  if (!err)
    return "no error";
  if (err.category() == error_category) {
    std::string out = "rdmactor: ";
    out += to_string(static_cast<errc>(err.code()));
    auto what = what_of(err);
    if (!what.empty())
      out += ": " + what;
    return out;
  }
  if (err.category() == caf::atom("system"))
    return "caf: " + caf::to_string(static_cast<caf::sec>(err.code()));
  if (auto cause = cause_of(err); cause != err)
    return "caf: remote_link_unreachable (" + render(cause) + ")";
  return caf::to_string(err);
}

} // namespace rdmactor
