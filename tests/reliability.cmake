# Reliability checks: bad-input tables through the real CLI, kill -9 crash safety,
# the kernels under oclgrind. Included from tests/CMakeLists.txt; docs/RELIABILITY.md describes
# what each one proves.

# Every bad input refused with one line and a non-zero exit, nothing overwritten; a save that
# runs out of space leaves the previous checkpoint loadable.
add_test(NAME test_bad_inputs COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_bad_inputs.sh
  $<TARGET_FILE:clcnn_train>)
set_tests_properties(test_bad_inputs PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# kill -9 at random moments and during saves: the newest checkpoint always loads, and resuming
# reproduces the uninterrupted run's losses and final checkpoint bit for bit.
add_test(NAME test_kill COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_kill.sh
  $<TARGET_FILE:clcnn_train>)
set_tests_properties(test_kill PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# Every kernel family once on tiny models, every step checked against the double-precision
# references (tests/ref/): losses, gradients, weights after each optimizer step,
# evaluation and inference. tests/oclgrind_check.sh runs the same program under oclgrind.
clcnn_test(test_kernels_small SOURCES test_kernels_small.c LIBS clcnn_ref)

# Every kernel source compiled by clang for spir64 at -O2 with warnings as errors: the
# warnings a device's compiler only prints (a loop it could not unroll, say) fail here.
add_test(NAME test_kernels_clang COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/check_kernels_clang.sh)
set_tests_properties(test_kernels_clang PROPERTIES SKIP_RETURN_CODE 77)

# The same program under oclgrind (label "oclgrind"; skipped when oclgrind is not installed):
# no invalid access, no API misuse, no data race, the reference checks pass there too, same
# figures as the default device. The clblast backend is left out: CLBlast's kernels are not
# ours, and under oclgrind it adds a minute (it was clean when run by hand:
# tests/oclgrind_check.sh PROG clblast).
add_test(NAME test_oclgrind COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/oclgrind_check.sh
  $<TARGET_FILE:test_kernels_small> cpu opencl)
set_tests_properties(test_oclgrind PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS oclgrind)
# The GEMM backends under oclgrind, the gpu one above all: its local-memory tiles and barriers
# are where races and out-of-bounds reads would hide (a whole model on it under oclgrind takes
# far too long: every work-item of every 256-item group is interpreted).
add_test(NAME test_oclgrind_gemm COMMAND ${CMAKE_COMMAND} -E env SELF_TEST=0
  bash ${CMAKE_CURRENT_SOURCE_DIR}/oclgrind_check.sh $<TARGET_FILE:test_gemm> gpu cpu opencl)
set_tests_properties(test_oclgrind_gemm PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
  LABELS oclgrind)
# The implicit-GEMM convolutions (work-groups staging tiles in local memory, as the gpu GEMM)
# under oclgrind: forward, weight and input gradients on a few small layer-ops rows (a 1x1
# kernel, a 5x5 one with padding over an odd batch, a strided one), every size, in two tests
# that ctest can run side by side (~150 s and ~235 s).
foreach(sizes "64,32" "64x128,64w8")
  string(REPLACE "," "_" suffix "${sizes}")
  add_test(NAME test_oclgrind_implicit_${suffix} COMMAND ${CMAKE_COMMAND} -E env SELF_TEST=0
    "PROG_ARGS=--implicit=${sizes} conv(3,1,bias=0)|conv(8,5,pad=2)|conv(2,3,stride=3,pad=1)"
    bash ${CMAKE_CURRENT_SOURCE_DIR}/oclgrind_check.sh $<TARGET_FILE:test_layer_ops> cpu)
  set_tests_properties(test_oclgrind_implicit_${suffix} PROPERTIES SKIP_RETURN_CODE 77
    TIMEOUT 600 LABELS oclgrind)
endforeach()
# Every layer-ops row with a 2x2 pool, the fused convolution's among them (its padded NCHW
# gradient written a plane per work-item, eight windows at a time; and Winograd's on the 5x5
# rows), under oclgrind (~180 s).
add_test(NAME test_oclgrind_pool COMMAND ${CMAKE_COMMAND} -E env SELF_TEST=0
  "PROG_ARGS=maxpool(2)" bash ${CMAKE_CURRENT_SOURCE_DIR}/oclgrind_check.sh
  $<TARGET_FILE:test_layer_ops> cpu)
set_tests_properties(test_oclgrind_pool PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
  LABELS oclgrind)
# The Winograd convolutions without a pool (their NCHW store in both variants, 8 x 2 and 4 x 4
# tiles a work-item, on odd maps) and the transform of the flipped weights, under oclgrind, on
# the two rows made for them, with the cpu backend only (Winograd takes no GEMM; ~30 s).
add_test(NAME test_oclgrind_winograd COMMAND ${CMAKE_COMMAND} -E env SELF_TEST=0
  "PROG_ARGS=--first-backend conv(3,5,pad=2)" bash ${CMAKE_CURRENT_SOURCE_DIR}/oclgrind_check.sh
  $<TARGET_FILE:test_layer_ops> cpu)
set_tests_properties(test_oclgrind_winograd PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
  LABELS oclgrind)

# libFuzzer harnesses (fuzz/): clang only, off by default. CI builds them with fuzz/smoke.sh
# instead, which needs no second configuration of the whole project.
option(CLCNN_FUZZ "Build the libFuzzer harnesses in fuzz/ and test them on their corpora (clang)"
  OFF)
if(CLCNN_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "CLCNN_FUZZ needs clang: configure with -DCMAKE_C_COMPILER=clang")
  endif()
  add_subdirectory(${PROJECT_SOURCE_DIR}/fuzz ${PROJECT_BINARY_DIR}/fuzz)
endif()
