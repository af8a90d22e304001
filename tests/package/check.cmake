cmake_minimum_required(VERSION 3.21)
# ctest package.find_package: install pushwire from BUILD_DIR into a fresh prefix, then configure,
# build and run tests/package/consumer against it with find_package(pushwire); then move the
# prefix and build the same consumer with `pkg-config --cflags pushwire` (pushwire.pc is
# relocatable).
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR CXX_COMPILER)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check.cmake needs -D${v}=...")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
# The library, headers and tools (component Unspecified): the Wireshark plugin's component
# installs into the system's plugin directory, an absolute path, checked below under DESTDIR.
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}" --component Unspecified
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
if(DEFINED PLUGINDIR AND NOT PLUGINDIR STREQUAL "")
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env "DESTDIR=${WORK_DIR}/destdir"
                          "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --component wireshark
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(rc OR NOT EXISTS "${WORK_DIR}/destdir${PLUGINDIR}/pushwire.so")
    message(FATAL_ERROR "cmake --install --component wireshark did not put pushwire.so in ${PLUGINDIR}")
  endif()
endif()
if(NOT EXISTS "${prefix}/share/pushwire/cmake/pushwireConfigVersion.cmake")
  message(FATAL_ERROR "no pushwireConfigVersion.cmake installed")
endif()
# ARCH_INDEPENDENT: a consumer with another pointer size must still accept the package.
block()
  set(CMAKE_SIZEOF_VOID_P 4)
  set(PACKAGE_FIND_NAME pushwire)
  set(PACKAGE_FIND_VERSION 0.1)
  set(PACKAGE_FIND_VERSION_MAJOR 0)
  set(PACKAGE_FIND_VERSION_MINOR 1)
  set(PACKAGE_FIND_VERSION_COUNT 2)
  include("${prefix}/share/pushwire/cmake/pushwireConfigVersion.cmake")
  if(PACKAGE_VERSION_UNSUITABLE OR NOT PACKAGE_VERSION_COMPATIBLE)
    message(FATAL_ERROR "a 32-bit consumer rejects the package: not ARCH_INDEPENDENT")
  endif()
endblock()
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/tests/package/consumer" -B "${WORK_DIR}/build"
                        "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed: ${rc}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed: ${rc}")
endif()
execute_process(COMMAND "${WORK_DIR}/build/consumer" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(rc OR NOT out MATCHES "\"pushwire.txn\":7")
  message(FATAL_ERROR "the consumer did not round-trip: ${rc} ${out}")
endif()
message(STATUS "consumer: ${out}")

# pkg-config, after moving the installed tree: the flags must point into the new place.
find_program(PKG_CONFIG NAMES pkg-config pkgconf)
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "pkg-config not found (Debian: pkg-config), needed to check pushwire.pc")
endif()
set(moved "${WORK_DIR}/moved")
file(RENAME "${prefix}" "${moved}")
set(ENV{PKG_CONFIG_PATH} "${moved}/share/pkgconfig")
execute_process(COMMAND "${PKG_CONFIG}" --cflags pushwire RESULT_VARIABLE rc OUTPUT_VARIABLE cflags
                ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(rc)
  message(FATAL_ERROR "pkg-config --cflags pushwire failed: ${err}")
endif()
if(NOT cflags MATCHES "^-I${moved}/")
  message(FATAL_ERROR "pushwire.pc is not relocatable: --cflags gives '${cflags}' after the prefix moved to ${moved}")
endif()
separate_arguments(cflags UNIX_COMMAND "${cflags}")
execute_process(COMMAND "${CXX_COMPILER}" -std=c++20 ${cflags} "${SOURCE_DIR}/tests/package/consumer/main.cpp"
                        -o "${WORK_DIR}/consumer-pc"
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc)
  message(FATAL_ERROR "building the consumer with pkg-config's flags failed: ${err}")
endif()
execute_process(COMMAND "${WORK_DIR}/consumer-pc" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(rc OR NOT out MATCHES "\"pushwire.txn\":7")
  message(FATAL_ERROR "the pkg-config consumer did not round-trip: ${rc} ${out}")
endif()
message(STATUS "pkg-config consumer (${cflags}): ${out}")
