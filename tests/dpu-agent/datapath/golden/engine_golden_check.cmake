# Regenerates engine.golden with its scapy script and fails if the committed
# file differs: a change on either side shows up here.
execute_process(COMMAND ${PYTHON} ${GEN} ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${GEN} failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${GOLDEN} ${OUT} RESULT_VARIABLE diff)
if(NOT diff EQUAL 0)
  message(FATAL_ERROR "engine.golden is stale: regenerate with ${PYTHON} ${GEN} ${GOLDEN}")
endif()
