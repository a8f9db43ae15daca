// The x86 dot products (DotKernelsX86.inc) for AVX2 + FMA + F16C; the only
// translation unit built with those instructions enabled and nothing more.

#define KVJIT_X86_DOT_KERNELS Avx2DotKernels
#define KVJIT_X86_DOT_KERNELS4 Avx2DotKernels4
#include "runtime/cpu/DotKernelsX86.inc"
