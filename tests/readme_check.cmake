# ctest "examples: README shows the examples verbatim": the code between the [readme] markers of
# each example that has them appears verbatim in README.md.
file(READ "${SOURCE_DIR}/README.md" readme)
foreach(example quickstart.cpp page_fault.cpp rnic_loopback.cpp)
  file(READ "${SOURCE_DIR}/examples/${example}" src)
  string(REGEX MATCH "// \\[readme\\]\n(.*)// \\[/readme\\]" _ "${src}")
  set(snippet "${CMAKE_MATCH_1}")
  if(snippet STREQUAL "")
    message(FATAL_ERROR "no [readme] markers in examples/${example}")
  endif()
  if(snippet MATCHES "^  ")  # a snippet from inside a function: the README shows it unindented
    string(REGEX REPLACE "\n  " "\n" snippet "\n${snippet}")
    string(SUBSTRING "${snippet}" 1 -1 snippet)
  endif()
  string(FIND "${readme}" "${snippet}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "README.md does not contain examples/${example}'s snippet verbatim")
  endif()
endforeach()
