# clcnn_embed_kernels(OUT file1.cl file2.cl ...)
# Generates OUT, a C file holding each .cl source as a NUL-terminated byte array plus a table
# {name, source, length} that src/program.c builds from. Regenerated when a .cl file changes.
function(clcnn_embed_kernels out)
  set(script ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/EmbedKernelsRun.cmake)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} "-DSOURCES=${ARGN}" -P ${script}
    DEPENDS ${ARGN} ${script}
    COMMENT "Embedding OpenCL kernel sources"
    VERBATIM)
endfunction()
