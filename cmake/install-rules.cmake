# Installs the headers and an exported CMake package: find_package(pushwire) gives
# pushwire::pushwire (and finds Boost, which it needs).
include(CMakePackageConfigHelpers)

set(PUSHWIRE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_DATADIR}/pushwire/cmake"
    CACHE STRING "Where pushwireConfig.cmake is installed, relative to the prefix")

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/pushwire"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS pushwire EXPORT pushwireTargets)
install(EXPORT pushwireTargets NAMESPACE pushwire::
        DESTINATION "${PUSHWIRE_INSTALL_CMAKEDIR}")

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/pushwireConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/pushwireConfig.cmake"
  INSTALL_DESTINATION "${PUSHWIRE_INSTALL_CMAKEDIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/pushwireConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion
  ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/pushwireConfig.cmake"
              "${PROJECT_BINARY_DIR}/pushwireConfigVersion.cmake"
        DESTINATION "${PUSHWIRE_INSTALL_CMAKEDIR}")
