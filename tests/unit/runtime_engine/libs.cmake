# beam-nano's tokenizer (text), and the server's structured-output vocabulary for the
# constrained-decoding tests.
target_link_libraries(${dir}_tests PRIVATE beamserve_text beamserve_server)
