// The four-row x86 dot products (DotKernelsX86.inc) for AVX2 + FMA + F16C
// with AVX-512 VL and VNNI: the byte dot products in one vpdpbusd each, the
// same bits as the AVX2 build. Only the four-row kernels: there, where one
// block's weights meet four activation rows, vpdpbusd makes a 128-token
// Q4_1 GEMM ~1.5x faster; the single-row GEMV of a decode step, bound by
// reading the weights, measured ~15% slower with it than with AVX2's pair
// of instructions (runtime/cpu/bench/KernelBench.cpp), so it stays AVX2.

#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__)
#error "DotKernelsAvx512Vnni.cpp must be compiled with -mavx512vl -mavx512vnni"
#endif

#define KVJIT_X86_DOT_KERNELS4 Avx512VnniDotKernels4
#include "runtime/cpu/DotKernelsX86.inc"
