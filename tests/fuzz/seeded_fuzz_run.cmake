# Runs the libFuzzer binary FUZZER (named NAME in messages) for SECONDS seconds (cmake -P) from the
# seed files in SEEDS, its corpus and reproducers under WORK_DIR. Fails on any crash, sanitizer
# report, leak, abort or timeout (10 s an input). Used by tokenizer_fuzz and grammar_fuzz.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/corpus ${WORK_DIR}/artifacts)
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048 -max_len=4096
          -print_final_stats=1 -artifact_prefix=${WORK_DIR}/artifacts/ ${WORK_DIR}/corpus ${SEEDS}
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${NAME} failed (exit ${result}); reproducer in ${WORK_DIR}/artifacts")
endif()
