#pragma once

#include "transport/fabric.hpp"

namespace rdmactor::transport::soft {

/// Opens a soft fabric device (TCP model of an RC queue pair).
caf::expected<device_ptr> open_device(const options& opts);

} // namespace rdmactor::transport::soft
