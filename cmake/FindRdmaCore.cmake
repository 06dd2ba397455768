# FindRdmaCore: libibverbs and librdmacm from rdma-core (Debian:
# libibverbs-dev, librdmacm-dev).  Imported targets: RdmaCore::ibverbs,
# RdmaCore::rdmacm.
find_path(RdmaCore_INCLUDE_DIR infiniband/verbs.h)
find_path(RdmaCore_CM_INCLUDE_DIR rdma/rdma_cma.h)
find_library(RdmaCore_IBVERBS_LIBRARY NAMES ibverbs)
find_library(RdmaCore_RDMACM_LIBRARY NAMES rdmacm)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(RdmaCore
  REQUIRED_VARS RdmaCore_INCLUDE_DIR RdmaCore_CM_INCLUDE_DIR
                RdmaCore_IBVERBS_LIBRARY RdmaCore_RDMACM_LIBRARY
  FAIL_MESSAGE "rdma-core not found: install libibverbs-dev librdmacm-dev (scripts/setup.sh does), or configure with -DRDMACTOR_VERBS=OFF")

if(RdmaCore_FOUND AND NOT TARGET RdmaCore::ibverbs)
  add_library(RdmaCore::ibverbs UNKNOWN IMPORTED)
  set_target_properties(RdmaCore::ibverbs PROPERTIES
    IMPORTED_LOCATION "${RdmaCore_IBVERBS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${RdmaCore_INCLUDE_DIR}")
  add_library(RdmaCore::rdmacm UNKNOWN IMPORTED)
  set_target_properties(RdmaCore::rdmacm PROPERTIES
    IMPORTED_LOCATION "${RdmaCore_RDMACM_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${RdmaCore_CM_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES RdmaCore::ibverbs)
endif()
mark_as_advanced(RdmaCore_INCLUDE_DIR RdmaCore_CM_INCLUDE_DIR
                 RdmaCore_IBVERBS_LIBRARY RdmaCore_RDMACM_LIBRARY)
