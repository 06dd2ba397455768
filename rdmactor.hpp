#pragma once

/// rdmactor: RDMA messaging and memory for CAF applications.
///
/// Include this header and link `rdmactor::rdmactor`.  Start with
/// `rdmactor::config` (options + error category), `rdmactor::node` (opens
/// the fabric, listens, connects) and `rdmactor::connection_actor` (the
/// typed interface of one peer).

#include "actors/allocator.hpp"
#include "actors/atoms.hpp"
#include "actors/config.hpp"
#include "actors/connection.hpp"
#include "actors/node.hpp"
#include "actors/node_actor.hpp"
#include "actors/remote_mr.hpp"
#include "common/errc.hpp"
#include "common/error.hpp"
#include "common/options.hpp"
#include "transport/local_mr.hpp"
#include "transport/mr_token.hpp"
