#include "actors/config.hpp"

#include "common/error.hpp"

namespace rdmactor {

config::config() {
  add_options(custom_options_, opts);
  register_error_category(*this);
}

} // namespace rdmactor
