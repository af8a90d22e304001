# pushwire_dev: what pushwire's own tests, tools, benchmarks and examples build with.
# Consumers of pushwire::pushwire never see these flags.
add_library(pushwire_dev INTERFACE)
target_link_libraries(pushwire_dev INTERFACE pushwire::pushwire)
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(pushwire_dev INTERFACE -Wall -Wextra $<$<BOOL:${PUSHWIRE_WERROR}>:-Werror>)
  if(PUSHWIRE_SANITIZE)
    set(_pw_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
    target_compile_options(pushwire_dev INTERFACE ${_pw_san})
    target_link_options(pushwire_dev INTERFACE ${_pw_san})
  endif()
endif()
