#pragma once

#include <caf/expected.hpp>

#include "rdmactor/options.hpp"
#include "rdmactor/transport/fabric.hpp"

/// The verbs fabric: the fabric interface on rdma-core (librdmacm for
/// connection management, libibverbs for PD, MR, CQ and RC QP).
namespace rdmactor::transport::verbs {

/// True when ibv_get_device_list finds at least one device.
bool devices_present() noexcept;

/// Opens the verbs fabric per options (device, port, gid_index, verbs_*
/// fields).
caf::expected<device_ptr> open_device(const options& opts);

} // namespace rdmactor::transport::verbs
