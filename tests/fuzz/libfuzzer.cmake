# beamserve_libfuzzer(NAME SOURCES ... HEADERS ... LIBS ...): a libFuzzer binary built with clang
# (-fsanitize=fuzzer,address,undefined) whatever compiler builds the project, one object per
# source (compiled in parallel, through ccache when there is one), as target NAME (built by
# default); sets NAME_binary in the caller's scope. Needs BEAMSERVE_FUZZ_CLANGXX.
find_program(BEAMSERVE_FUZZ_CCACHE NAMES ccache)
function(beamserve_libfuzzer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;HEADERS;LIBS")
  set(flags -std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
      -fno-sanitize-recover=undefined)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/fuzz/${name}_objects)
  set(objects)
  foreach(source ${arg_SOURCES})
    get_filename_component(stem ${source} NAME_WE)
    set(object ${dir}/${stem}.o)
    add_custom_command(
      OUTPUT ${object}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
      COMMAND ${BEAMSERVE_FUZZ_CCACHE} ${BEAMSERVE_FUZZ_CLANGXX} ${flags} -I${CMAKE_SOURCE_DIR}/src
              -c ${source} -o ${object}
      DEPENDS ${source} ${arg_HEADERS}
      COMMENT "Compiling ${stem}.cpp for ${name} (clang, libFuzzer, ASan, UBSan)"
      VERBATIM)
    list(APPEND objects ${object})
  endforeach()
  set(binary ${CMAKE_CURRENT_BINARY_DIR}/fuzz/${name})
  add_custom_command(
    OUTPUT ${binary}
    COMMAND ${BEAMSERVE_FUZZ_CLANGXX} ${flags} ${objects} ${arg_LIBS} -o ${binary}
    DEPENDS ${objects}
    COMMENT "Linking ${name}"
    VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${binary})
  set(${name}_binary ${binary} PARENT_SCOPE)
endfunction()

# beamserve_seeded_fuzz_test(NAME SEEDS): ctest NAME runs the libFuzzer binary NAME_binary (from
# beamserve_libfuzzer, in the caller's scope) for 20 s from the seed files in SEEDS
# (seeded_fuzz_run.cmake: any crash, sanitizer report, leak or timeout fails it).
set(BEAMSERVE_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR})
function(beamserve_seeded_fuzz_test name seeds)
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -DFUZZER=${${name}_binary} -DSEEDS=${seeds}
                   -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/fuzz/${name}_work -DSECONDS=20
                   -DNAME=${name} -P ${BEAMSERVE_FUZZ_DIR}/seeded_fuzz_run.cmake)
  set_tests_properties(${name} PROPERTIES TIMEOUT 180)
endfunction()
