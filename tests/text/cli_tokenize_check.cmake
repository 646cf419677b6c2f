# `beamserve tokenize` / `beamserve detokenize` end to end on the Qwen3 tokenizer (cmake -P;
# see tests/text/CMakeLists.txt): ids as a JSON array, --special, exact text back without a
# trailing newline, and errors for a bad id.
function(run_cli expected_rc out_var)
  execute_process(COMMAND ${BEAMSERVE} ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL expected_rc)
    message(FATAL_ERROR "beamserve ${ARGN}: exit ${rc} (wanted ${expected_rc}): ${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

function(expect_equal what got want)
  if(NOT got STREQUAL want)
    message(FATAL_ERROR "${what}: got '${got}', want '${want}'")
  endif()
endfunction()

run_cli(0 ids tokenize --model ${MODEL} --text "Hello World<|im_end|>")
expect_equal("tokenize" "${ids}" "[9707,4337,27,91,318,6213,91,29]\n")
run_cli(0 ids tokenize --model ${MODEL} --text "Hello World<|im_end|>" --special)
expect_equal("tokenize --special" "${ids}" "[9707,4337,151645]\n")
run_cli(0 text detokenize --model ${MODEL} --ids 9707,4337,151645)
expect_equal("detokenize" "${text}" "Hello World<|im_end|>")
run_cli(0 text detokenize --model ${MODEL} --ids 9707,4337,151645 --skip-special)
expect_equal("detokenize --skip-special" "${text}" "Hello World")
run_cli(1 text detokenize --model ${MODEL} --ids 99999999)
run_cli(2 text tokenize --model ${MODEL})
