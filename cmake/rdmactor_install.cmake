# Installs the library targets and a CMake package file so that a CAF
# application outside this tree can do:
#   find_package(rdmactor REQUIRED)
#   target_link_libraries(app PRIVATE rdmactor::rdmactor)
include(CMakePackageConfigHelpers)

install(EXPORT rdmactorTargets NAMESPACE rdmactor::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rdmactor)
configure_package_config_file(
  "${CMAKE_CURRENT_SOURCE_DIR}/cmake/rdmactorConfig.cmake.in"
  "${CMAKE_CURRENT_BINARY_DIR}/rdmactorConfig.cmake"
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rdmactor)
write_basic_package_version_file(
  "${CMAKE_CURRENT_BINARY_DIR}/rdmactorConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/rdmactorConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/rdmactorConfigVersion.cmake"
              "${CMAKE_CURRENT_SOURCE_DIR}/cmake/FindCAF.cmake"
              "${CMAKE_CURRENT_SOURCE_DIR}/cmake/FindRdmaCore.cmake"
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rdmactor)
install(FILES "${CMAKE_CURRENT_SOURCE_DIR}/rdmactor.hpp"
              "${CMAKE_CURRENT_SOURCE_DIR}/include/rdmactor/testing.hpp"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rdmactor)
install(FILES "${CMAKE_CURRENT_SOURCE_DIR}/config/rdmactor.ini"
        DESTINATION ${CMAKE_INSTALL_DATADIR}/rdmactor)
