# Runs tokenizer_fuzz for SECONDS seconds (cmake -P; see tests/text/CMakeLists.txt) from the seeds
# in SEEDS. Fails on any crash, sanitizer report, leak, mismatch abort or timeout.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/corpus ${WORK_DIR}/artifacts)
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048 -max_len=4096
          -print_final_stats=1 -artifact_prefix=${WORK_DIR}/artifacts/ ${WORK_DIR}/corpus ${SEEDS}
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "tokenizer_fuzz failed (exit ${result}); reproducer in ${WORK_DIR}/artifacts")
endif()
