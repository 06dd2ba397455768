#include "rdmactor/error.hpp"

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
  return caf::to_string(err);
}

} // namespace rdmactor
