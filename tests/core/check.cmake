# ctest -L core: pushwire/core.hpp is the embeddable core.
#  1. It includes every public header except the printing, text, pcap and test-hook headers, the
#     umbrellas, rnic/, pp/ and net/ (so a new header must be classified here).
#  2. tests/core/core_check.cpp, which includes only core.hpp, compiles and links with
#     -fno-exceptions -fno-rtti -Wall -Wextra -Werror, and runs.
#  3. Its dependency list (-M) names none of <iostream>, <ostream>, <sstream>, <fstream>; the same
#     scan of a TU including pushwire.hpp must find <ostream> (so the scan can fail).
foreach(v CXX SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check.cmake needs -D${v}=...")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(flags -std=c++20 -fno-exceptions -fno-rtti -I "${SOURCE_DIR}/include")
if(DEFINED INCLUDES AND NOT INCLUDES STREQUAL "")
  string(REPLACE "|" ";" INCLUDES "${INCLUDES}")
  foreach(d IN LISTS INCLUDES)
    list(APPEND flags -isystem "${d}")
  endforeach()
endif()

# 1. Which headers are not core (flow/conform.hpp: a capture checker's tables and texts, for
# tools and the plugin).
set(not_core wire/wire.hpp wire/print.hpp wire/json.hpp wire/hex.hpp wire/keys.hpp wire/pcap.hpp msg/msg.hpp msg/print.hpp
             ib/ib.hpp ib/keys.hpp ib/print.hpp cell/cell.hpp cell/print.hpp cell/testing.hpp flow/flow.hpp flow/testing.hpp
             flow/conform.hpp pushwire.hpp core.hpp)
file(READ "${SOURCE_DIR}/include/pushwire/core.hpp" core)
file(GLOB_RECURSE headers RELATIVE "${SOURCE_DIR}/include/pushwire" "${SOURCE_DIR}/include/pushwire/*.hpp")
set(missing)
foreach(h IN LISTS headers)
  # detail/ is reached through its users; the reference RNIC (rnic/) is a device above the core:
  # it allocates its tables and rings; the messaging layer (pp/) runs over it; net/ is real I/O.
  if(h MATCHES "/detail/" OR h MATCHES "^rnic/" OR h MATCHES "^pp/" OR h MATCHES "^net/")
    continue()
  endif()
  string(FIND "${core}" "#include <pushwire/${h}>" at)
  list(FIND not_core "${h}" excluded)
  if(at EQUAL -1 AND excluded EQUAL -1)
    list(APPEND missing "${h}")
  elseif(NOT at EQUAL -1 AND NOT excluded EQUAL -1)
    message(FATAL_ERROR "core.hpp includes pushwire/${h}, which is not core")
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "core.hpp leaves out ${missing}: include them, or list them as not core in tests/core/check.cmake")
endif()

# 2. Build and run.
set(src "${SOURCE_DIR}/tests/core/core_check.cpp")
execute_process(COMMAND "${CXX}" ${flags} -O2 -Wall -Wextra -Werror "${src}" -o "${WORK_DIR}/core_check"
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc)
  message(FATAL_ERROR "core_check.cpp does not build with -fno-exceptions -fno-rtti -Werror:\n${err}")
endif()
execute_process(COMMAND "${WORK_DIR}/core_check" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(rc OR NOT out MATCHES "core: ok")
  message(FATAL_ERROR "core_check failed (${rc}):\n${out}")
endif()

# 3. The headers a TU pulls in, from the compiler's dependency list.
function(stream_headers tu out_var)
  execute_process(COMMAND "${CXX}" ${flags} -M "${tu}" RESULT_VARIABLE rc OUTPUT_VARIABLE deps ERROR_VARIABLE err)
  if(rc)
    message(FATAL_ERROR "${CXX} -M ${tu} failed:\n${err}")
  endif()
  string(REPLACE "\\\n" " " deps "${deps}")
  string(REGEX REPLACE "[ \t\r\n]+" ";" deps "${deps}")
  set(found)
  foreach(d IN LISTS deps)
    get_filename_component(name "${d}" NAME)
    if(name MATCHES "^(iostream|ostream|sstream|fstream)$")
      list(APPEND found "<${name}> (${d})")
    endif()
  endforeach()
  set(${out_var} "${found}" PARENT_SCOPE)
endfunction()
stream_headers("${src}" core_streams)
if(core_streams)
  list(JOIN core_streams "\n  " lines)
  message(FATAL_ERROR "core.hpp pulls in stream headers:\n  ${lines}")
endif()
file(WRITE "${WORK_DIR}/all.cpp" "#include <pushwire/pushwire.hpp>\n")
stream_headers("${WORK_DIR}/all.cpp" all_streams)
if(NOT all_streams MATCHES "<ostream>")
  message(FATAL_ERROR "the scan finds no <ostream> behind pushwire.hpp (which has wire/print.hpp): the check is broken")
endif()
message(STATUS "core.hpp: builds with -fno-exceptions -fno-rtti -Werror, runs, and includes no stream header "
               "(pushwire.hpp includes ${all_streams})")
