# CMake functions for PTO's generators. In this tree (after pto and pto-cli are defined):
#
# pto_add_generator(<gen> SOURCES <files...>)
#   An executable whose sources register kernels with PTO_REGISTER_KERNEL
#   (backends/GeneratorRegistry.h); main() comes from tools/pto/GeneratorMain.cpp.
#
# pto_add_library(<name>
#                 { GENERATOR <gen> [KERNELS <kernel>...]
#                 | PROGRAM <workload or program.json> [SIZES K=V ...] [SCHEDULE <file.json|default|plain>] }
#                 [TARGETS <target>...]   (or TARGET <target>; default host)
#                 [DISPATCH]              several CPU targets -> one library with runtime dispatch
#                 [RUNTIME <runtime>]     leave the Halide runtime out and link <runtime> (pto_add_runtime)
#                 [SCHEDULES <file.json | tuning.db>])
#   Generates at build time and defines imported static libraries that link
#   without Halide or PTO: <name> (one target, or DISPATCH), else one per target
#   named <name>_<target> (non-alphanumerics become _). Each carries its
#   include directory (<name>_pto.h, Halide's per-kernel headers, HalideRuntime.h).
#   Schedules: SCHEDULES (a JSON file, or a tuning database whose best records
#   are used per kernel and target), else SCHEDULE for PROGRAM, else defaults.
#
# pto_add_runtime(<runtime> TARGETS <target>...)
#   One Halide runtime library shared by several libraries generated with
#   RUNTIME <runtime>; its device APIs are the union of the targets'.

add_library(pto_generator_main OBJECT ${CMAKE_CURRENT_LIST_DIR}/../tools/pto/GeneratorMain.cpp)
target_link_libraries(pto_generator_main PUBLIC pto CLI11::CLI11)

function(pto_add_generator name)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "pto_add_generator(${name}): SOURCES is required")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE pto_generator_main pto)
endfunction()

# Defines the imported library <lib> for files generated into <dir>.
function(_pto_import lib dir stamp_target)
  add_library(${lib} STATIC IMPORTED GLOBAL)
  file(MAKE_DIRECTORY ${dir})
  set_target_properties(${lib} PROPERTIES
    IMPORTED_LOCATION ${dir}/${lib}.a
    INTERFACE_INCLUDE_DIRECTORIES ${dir}
    INTERFACE_LINK_LIBRARIES "Threads::Threads;${CMAKE_DL_LIBS}")
  add_dependencies(${lib} ${stamp_target})
endfunction()

function(pto_add_runtime name)
  cmake_parse_arguments(ARG "" "" "TARGETS" ${ARGN})
  if(NOT ARG_TARGETS)
    set(ARG_TARGETS host)
  endif()
  list(JOIN ARG_TARGETS "," targets)
  set(out ${CMAKE_BINARY_DIR}/generated/${name})
  add_custom_command(
    OUTPUT ${out}/${name}.a
    COMMAND $<TARGET_FILE:pto-cli> gen --runtime-only --targets ${targets} --out ${out} --name ${name}
    DEPENDS pto-cli
    COMMENT "pto gen --runtime-only ${name} (${targets})"
    VERBATIM)
  add_custom_target(${name}_generate DEPENDS ${out}/${name}.a)
  _pto_import(${name} ${out} ${name}_generate)
endfunction()

function(pto_add_library name)
  cmake_parse_arguments(ARG "DISPATCH" "PROGRAM;GENERATOR;TARGET;SCHEDULE;SCHEDULES;RUNTIME"
                        "SIZES;KERNELS;TARGETS" ${ARGN})
  if(NOT ARG_PROGRAM AND NOT ARG_GENERATOR)
    message(FATAL_ERROR "pto_add_library(${name}): give GENERATOR <gen> or PROGRAM <workload>")
  endif()
  if(ARG_TARGET)
    list(APPEND ARG_TARGETS ${ARG_TARGET})
  endif()
  if(NOT ARG_TARGETS)
    set(ARG_TARGETS host)
  endif()
  list(JOIN ARG_TARGETS "," targets)
  set(out ${CMAKE_BINARY_DIR}/generated/${name})
  set(args --targets ${targets} --out ${out} --name ${name})
  set(deps)
  if(ARG_DISPATCH)
    list(APPEND args --dispatch)
  endif()
  if(ARG_RUNTIME)
    list(APPEND args --no-runtime)
  endif()
  if(ARG_SCHEDULES)
    list(APPEND args --schedules ${ARG_SCHEDULES})
    list(APPEND deps ${ARG_SCHEDULES})
  endif()
  if(ARG_GENERATOR)
    set(cmd $<TARGET_FILE:${ARG_GENERATOR}>)
    list(APPEND deps ${ARG_GENERATOR})
    if(ARG_KERNELS)
      list(JOIN ARG_KERNELS "," kernels)
      list(APPEND args --kernels ${kernels})
    endif()
    set(what "generator ${ARG_GENERATOR}")
  else()
    set(cmd $<TARGET_FILE:pto-cli> gen ${ARG_PROGRAM})
    list(APPEND deps pto-cli)
    foreach(s ${ARG_SIZES})
      list(APPEND args --set ${s})
    endforeach()
    # Reproducible by default: a tuning database is used only when named (SCHEDULES x.db).
    if(ARG_SCHEDULE)
      list(APPEND args --schedule ${ARG_SCHEDULE})
    else()
      list(APPEND args --schedule default)
    endif()
    set(what "${ARG_PROGRAM}")
  endif()
  # The libraries this call produces.
  list(LENGTH ARG_TARGETS n)
  set(libs)
  if(ARG_DISPATCH OR n EQUAL 1)
    set(libs ${name})
  else()
    foreach(t ${ARG_TARGETS})
      string(MAKE_C_IDENTIFIER "${t}" tid)
      list(APPEND libs ${name}_${tid})
    endforeach()
  endif()
  set(outputs)
  foreach(lib ${libs})
    list(APPEND outputs ${out}/${lib}.a ${out}/${lib}_pto.h)
  endforeach()
  add_custom_command(
    OUTPUT ${outputs}
    COMMAND ${cmd} ${args}
    DEPENDS ${deps}
    COMMENT "pto: generating ${libs} (${what}, targets ${targets})"
    VERBATIM)
  add_custom_target(${name}_generate DEPENDS ${outputs})
  foreach(lib ${libs})
    _pto_import(${lib} ${out} ${name}_generate)
    if(ARG_RUNTIME)
      set_property(TARGET ${lib} APPEND PROPERTY INTERFACE_LINK_LIBRARIES ${ARG_RUNTIME})
    endif()
  endforeach()
endfunction()
