# ctest "fuzz: run <name>": runs fuzz_<name> for SECONDS from a scratch copy of its corpus (the
# checked-in corpus stays as it is), with its dictionary when there is one, and prints
# libFuzzer's final stats line (exec/s, cov) so the run reports them. A crash fails the test
# and leaves the reproducer in WORK.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/corpus")
file(GLOB seeds "${SOURCE}/corpus/${NAME}/*" "${SOURCE}/regressions/${NAME}/*")
if(seeds)
  file(COPY ${seeds} DESTINATION "${WORK}/corpus")
endif()
set(args -max_total_time=${SECONDS} -print_final_stats=1 -artifact_prefix=${WORK}/ -rss_limit_mb=2048 -timeout=10)
if(EXISTS "${SOURCE}/dict/${NAME}.dict")
  list(APPEND args -dict=${SOURCE}/dict/${NAME}.dict)
endif()
execute_process(COMMAND "${FUZZER}" ${args} "${WORK}/corpus"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "#[0-9]+[^\n]*DONE[^\n]*" done "${err}")
string(REGEX MATCH "stat::average_exec_per_sec:[ ]*[0-9]+" eps "${err}")
message(STATUS "${NAME}: ${done} ${eps}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzz_${NAME} failed (${rc}):\n${err}")
endif()
