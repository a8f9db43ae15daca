#ifndef KVJIT_RUNTIME_CPU_GCC12AVX512WARNINGS_H_
#define KVJIT_RUNTIME_CPU_GCC12AVX512WARNINGS_H_

// For the translation units that use AVX-512 intrinsics, included where the
// warnings should stop: GCC 12's intrinsics start some results from
// _mm512_undefined_*(), which its -W(maybe-)uninitialized reports at every
// inlined use (GCC bug 105593, fixed in 13). The pragmas hold for the rest
// of the including file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#endif  // KVJIT_RUNTIME_CPU_GCC12AVX512WARNINGS_H_
