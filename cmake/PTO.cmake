# pto_add_library(<name> PROGRAM <workload or program.json> [TARGET <target>]
#                 [SCHEDULE <file.json|default|plain>] [SIZES K=V ...])
#
# Runs `pto gen` at build time and defines an imported static library target
# <name> (plus its include directory) that links without Halide or PTO.
function(pto_add_library name)
  cmake_parse_arguments(ARG "" "PROGRAM;TARGET;SCHEDULE" "SIZES" ${ARGN})
  if(NOT ARG_PROGRAM)
    message(FATAL_ERROR "pto_add_library(${name}): PROGRAM is required")
  endif()
  if(NOT ARG_TARGET)
    set(ARG_TARGET host)
  endif()
  if(NOT ARG_SCHEDULE)
    set(ARG_SCHEDULE default)
  endif()
  set(out ${CMAKE_BINARY_DIR}/generated/${name})
  set(sizes)
  foreach(s ${ARG_SIZES})
    list(APPEND sizes --set ${s})
  endforeach()
  add_custom_command(
    OUTPUT ${out}/${name}.a ${out}/${name}.h ${out}/${name}_pto.h
    COMMAND $<TARGET_FILE:pto-cli> gen ${ARG_PROGRAM} --target ${ARG_TARGET} --schedule ${ARG_SCHEDULE}
            --out ${out} --name ${name} ${sizes}
    DEPENDS pto-cli
    COMMENT "pto gen ${name} (${ARG_PROGRAM}, target ${ARG_TARGET})"
    VERBATIM)
  add_custom_target(${name}_generate DEPENDS ${out}/${name}.a)
  add_library(${name} STATIC IMPORTED GLOBAL)
  file(MAKE_DIRECTORY ${out})
  set_target_properties(${name} PROPERTIES
    IMPORTED_LOCATION ${out}/${name}.a
    INTERFACE_INCLUDE_DIRECTORIES ${out}
    INTERFACE_LINK_LIBRARIES "Threads::Threads;${CMAKE_DL_LIBS}")
  add_dependencies(${name} ${name}_generate)
endfunction()
