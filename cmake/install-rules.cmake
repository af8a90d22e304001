# Installs the headers, an exported CMake package (find_package(pushwire) gives
# pushwire::pushwire and finds Boost, which it needs) and a pkg-config file, pushwire.pc.
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

# pushwire.pc, in <datadir>/pkgconfig (header-only: arch-independent). Its prefix is relative to
# its own directory (${pcfiledir}), so an installed tree can move.
set(PUSHWIRE_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_DATADIR}/pkgconfig"
    CACHE STRING "Where pushwire.pc is installed, relative to the prefix")
file(RELATIVE_PATH PUSHWIRE_PC_TO_PREFIX "/prefix/${PUSHWIRE_INSTALL_PKGCONFIGDIR}" "/prefix")
string(REGEX REPLACE "/$" "" PUSHWIRE_PC_TO_PREFIX "${PUSHWIRE_PC_TO_PREFIX}")
configure_file("${PROJECT_SOURCE_DIR}/cmake/pushwire.pc.in" "${PROJECT_BINARY_DIR}/pushwire.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/pushwire.pc" DESTINATION "${PUSHWIRE_INSTALL_PKGCONFIGDIR}")
