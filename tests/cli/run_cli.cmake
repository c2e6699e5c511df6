# Runs one `regatta` command line and checks its exit code and output.
#   -DREGATTA=path -DARGS="a;b;c" -DEXPECT_EXIT=N [-DSTDOUT_REGEX=...] [-DSTDERR_REGEX=...]
#   [-DSTDERR_ONE_LINE=ON] [-DSTDOUT_NOT_REGEX=...] [-DENV="NAME=value;..."]
execute_process(COMMAND ${CMAKE_COMMAND} -E env ${ENV} ${REGATTA} ${ARGS}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT "${rc}" STREQUAL "${EXPECT_EXIT}")
  message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT_EXIT}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(DEFINED STDOUT_REGEX AND NOT out MATCHES "${STDOUT_REGEX}")
  message(FATAL_ERROR "stdout does not match '${STDOUT_REGEX}':\n${out}")
endif()
if(DEFINED STDOUT_NOT_REGEX AND out MATCHES "${STDOUT_NOT_REGEX}")
  message(FATAL_ERROR "stdout matches '${STDOUT_NOT_REGEX}' but must not:\n${out}")
endif()
if(DEFINED STDERR_REGEX AND NOT err MATCHES "${STDERR_REGEX}")
  message(FATAL_ERROR "stderr does not match '${STDERR_REGEX}':\n${err}")
endif()
if(STDERR_ONE_LINE)
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "stderr must be exactly one line, got ${n} lines:\n${err}")
  endif()
endif()
