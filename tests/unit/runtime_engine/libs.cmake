target_link_libraries(${dir}_tests PRIVATE beamserve_text)
