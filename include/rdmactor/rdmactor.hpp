#pragma once

/// rdmactor: RDMA messaging and memory for CAF applications.
///
/// Include this header and link `rdmactor::rdmactor`.  Start with
/// `rdmactor::config` (options + error category), `rdmactor::node` (opens
/// the fabric, listens, connects) and `rdmactor::connection_actor` (the
/// typed interface of one peer).

#include "rdmactor/allocator.hpp"
#include "rdmactor/atoms.hpp"
#include "rdmactor/config.hpp"
#include "rdmactor/connection.hpp"
#include "rdmactor/data_handler.hpp"
#include "rdmactor/errc.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/local_mr.hpp"
#include "rdmactor/mr_token.hpp"
#include "rdmactor/node.hpp"
#include "rdmactor/node_actor.hpp"
#include "rdmactor/options.hpp"
#include "rdmactor/remote_mr.hpp"
#include "rdmactor/scheduler_job.hpp"
#include "rdmactor/system_hook.hpp"
#include "rdmactor/unexpected.hpp"
