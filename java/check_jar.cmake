# The jar ships no benchmark hook: no class or resource named *bench* (dev.ebb.Bench is compiled with
# the tests), and the JNI library it carries exports no native of one (jni_bench.c is in
# libebb_jni_bench.so, beside the jar):
#   cmake -DJAR_TOOL=<jar> -DJAR=<ebb.jar> -DJNI=<the staged libebb_jni.so> -P check_jar.cmake
cmake_minimum_required(VERSION 3.25)  # CMP0007: empty list elements kept, then filtered
# Fails unless COMMAND's output names EXPECTED (a sign it listed the right thing), and when a line of it
# matches FORBIDDEN: then WHAT, with those lines.
function(refuse_in_listing expected forbidden what)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT listing MATCHES "${expected}")
    message(FATAL_ERROR "${ARGN} failed (or its output has no ${expected}):\n${listing}")
  endif()
  string(REPLACE "\n" ";" lines "${listing}")
  list(FILTER lines INCLUDE REGEX "${forbidden}")
  if(lines)
    message(FATAL_ERROR "${what}: ${lines}")
  endif()
endfunction()

refuse_in_listing("dev/ebb/Session.class" "[Bb][Ee][Nn][Cc][Hh]" "${JAR} carries benchmark entries"
                  "${JAR_TOOL}" tf "${JAR}")
refuse_in_listing("Java_dev_ebb_Session_" "[Bb]ench" "${JNI} exports benchmark natives"
                  nm -D --defined-only "${JNI}")
message(STATUS "${JAR}: no benchmark class, resource or native")
