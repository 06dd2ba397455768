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
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rdmactor)
# The public headers, and nothing else: <prefix>/include holds rdmactor/.
install(DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}/include/rdmactor"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Installing a Debug build is allowed (the package serves Release and Debug
# consumers alike) but rarely meant: say so.
if(CMAKE_BUILD_TYPE STREQUAL "Debug")
  install(CODE "message(WARNING \"rdmactor: installing a Debug build \
(unoptimized). For a Release package: cmake -S . -B \
build-release -DCMAKE_BUILD_TYPE=Release -DRDMACTOR_BUILD_TESTS=OFF && \
cmake --build build-release && cmake --install build-release --prefix P\")")
endif()
install(FILES "${CMAKE_CURRENT_SOURCE_DIR}/config/rdmactor.ini"
        DESTINATION ${CMAKE_INSTALL_DATADIR}/rdmactor)
