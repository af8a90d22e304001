# ctest "examples: README quickstart": the code between the [readme] markers of
# examples/quickstart.cpp appears verbatim in README.md.
file(READ "${SOURCE_DIR}/examples/quickstart.cpp" src)
file(READ "${SOURCE_DIR}/README.md" readme)
string(REGEX MATCH "// \\[readme\\]\n(.*)// \\[/readme\\]" _ "${src}")
set(snippet "${CMAKE_MATCH_1}")
if(snippet STREQUAL "")
  message(FATAL_ERROR "no [readme] markers in examples/quickstart.cpp")
endif()
string(FIND "${readme}" "${snippet}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not contain examples/quickstart.cpp's snippet verbatim")
endif()
