# Runs grammar_fuzz for SECONDS seconds (cmake -P; see grammar.cmake) from the seeds in SEEDS
# (each file: a mode byte, then a grammar, schema, regex or tag; grammar_fuzz.cpp). Fails on any
# crash, sanitizer report, leak or timeout (10 s an input: compiles are bounded near 1 s).
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/corpus ${WORK_DIR}/artifacts)
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048 -max_len=4096
          -print_final_stats=1 -artifact_prefix=${WORK_DIR}/artifacts/ ${WORK_DIR}/corpus ${SEEDS}
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "grammar_fuzz failed (exit ${result}); reproducer in ${WORK_DIR}/artifacts")
endif()
