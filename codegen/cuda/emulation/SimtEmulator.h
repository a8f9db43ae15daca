// A host emulation of the CUDA features kvjit's generated kernels use, so
// that a generated translation unit compiles with the host C++ compiler and
// its kernels run on the CPU (--verify of a CUDA executable without a GPU,
// and the emulation tests): every CUDA thread of a block is
// a fiber, __syncthreads waits for the block, __shfl_xor_sync for the
// warp. Blocks run one after another, so `__shared__` is a static local.
//
// It also checks what a GPU would not report: a shuffle in a warp one of
// whose lanes has exited (full-mask shuffles need all 32), a __syncthreads
// that some of the block's threads never reach, and a deadlock.
//
// Embedded as text by HostKernels.cpp and included (-include) before the
// generated source; not a header of the project's own code.
#ifndef KVJIT_CODEGEN_CUDA_EMULATION_SIMTEMULATOR_H_
#define KVJIT_CODEGEN_CUDA_EMULATION_SIMTEMULATOR_H_

#include <setjmp.h>
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace simt {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

enum class Wait { kNone, kWarp, kBlock };

struct Fiber {
  Dim3 thread;
  ucontext_t start;
  jmp_buf resume;
  bool started = false;
  bool done = false;
  Wait wait = Wait::kNone;
  uint64_t warp_epoch = 0;   // warp barriers passed
  uint64_t block_epoch = 0;  // __syncthreads passed
};

struct Machine {
  Dim3 block_idx, block_dim, grid_dim;
  std::vector<Fiber> fibers;
  std::vector<std::vector<char>> stacks;
  Fiber* current = nullptr;
  jmp_buf scheduler;
  const std::function<void()>* kernel = nullptr;
  float lanes[32][32];  // [warp][lane]: the values a shuffle exchanges
  std::string error;
};

inline Machine& machine() {
  static Machine instance;
  return instance;
}

inline const Dim3& CurrentThread() { return machine().current->thread; }

inline void Yield() {
  Machine& m = machine();
  if (_setjmp(m.current->resume) == 0) _longjmp(m.scheduler, 1);
}

inline void Fail(const std::string& message) {
  Machine& m = machine();
  if (m.error.empty()) m.error = message;
}

// Waits until every lane of the current warp has passed as many warp
// barriers as this one.
inline void WarpBarrier() {
  Fiber* self = machine().current;
  ++self->warp_epoch;
  self->wait = Wait::kWarp;
  Yield();
}

inline void SyncThreads() {
  Machine& m = machine();
  ++m.current->block_epoch;
  m.current->wait = Wait::kBlock;
  Yield();
}

inline bool Ready(const Fiber& fiber) {
  Machine& m = machine();
  switch (fiber.wait) {
    case Wait::kNone:
      return true;
    case Wait::kWarp: {
      const unsigned first = fiber.thread.x / 32 * 32;
      const unsigned end = std::min<unsigned>(first + 32, m.block_dim.x);
      for (unsigned t = first; t < end; ++t) {
        const Fiber& lane = m.fibers[t];
        if (lane.warp_epoch >= fiber.warp_epoch) continue;
        if (lane.done) {
          Fail("a shuffle in a warp one of whose lanes has exited");
          continue;
        }
        return false;
      }
      return true;
    }
    case Wait::kBlock:
      for (const Fiber& other : m.fibers) {
        if (other.block_epoch >= fiber.block_epoch) continue;
        if (other.done) {
          Fail("a __syncthreads that an exited thread of the block never reached");
          continue;
        }
        return false;
      }
      return true;
  }
  return true;
}

inline void FiberMain() {
  Machine& m = machine();
  (*m.kernel)();
  m.current->done = true;
  _longjmp(m.scheduler, 1);
}

// Runs `kernel` over a grid of blocks of `threads` threads; returns the
// first misuse found ("" if none).
inline std::string Run(const std::function<void()>& kernel, const unsigned grid[3],
                       unsigned threads) {
  Machine& m = machine();
  m.error.clear();
  m.kernel = &kernel;
  m.block_dim = {threads, 1, 1};
  m.grid_dim = {grid[0], grid[1], grid[2]};
  constexpr size_t kStackBytes = 256 * 1024;
  while (m.stacks.size() < threads) m.stacks.emplace_back(kStackBytes);
  for (unsigned z = 0; z < grid[2]; ++z) {
    for (unsigned y = 0; y < grid[1]; ++y) {
      for (unsigned x = 0; x < grid[0]; ++x) {
        m.block_idx = {x, y, z};
        m.fibers.assign(threads, Fiber{});
        for (unsigned t = 0; t < threads; ++t) m.fibers[t].thread = {t, 0, 0};
        size_t remaining = threads;
        while (remaining > 0) {
          bool progress = false;
          for (Fiber& fiber : m.fibers) {
            if (fiber.done || !Ready(fiber)) continue;
            progress = true;
            fiber.wait = Wait::kNone;
            m.current = &fiber;
            if (_setjmp(m.scheduler) == 0) {
              if (!fiber.started) {
                fiber.started = true;
                getcontext(&fiber.start);
                std::vector<char>& stack = m.stacks[&fiber - m.fibers.data()];
                fiber.start.uc_stack.ss_sp = stack.data();
                fiber.start.uc_stack.ss_size = stack.size();
                fiber.start.uc_link = nullptr;
                makecontext(&fiber.start, FiberMain, 0);
                setcontext(&fiber.start);
              }
              _longjmp(fiber.resume, 1);
            }
            if (fiber.done) --remaining;
          }
          if (!progress) return "deadlock: no thread of the block can go on";
        }
        if (!m.error.empty()) return m.error;
      }
    }
  }
  return m.error;
}

inline float Shuffle(float value, int offset) {
  Machine& m = machine();
  const unsigned lane = m.current->thread.x & 31, warp = m.current->thread.x >> 5;
  m.lanes[warp][lane] = value;
  WarpBarrier();
  const float partner = m.lanes[warp][(lane ^ offset) & 31];
  WarpBarrier();
  return partner;
}

inline uint16_t FloatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u));
  }
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (magnitude < 0x38800000u) {  // subnormal or zero in f16: round 2^-24 units
    const float scaled = std::fabs(value) * 16777216.0f;  // exact
    const float rounded = std::nearbyint(scaled);         // ties to even
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(rounded));
  }
  const uint32_t exponent = (magnitude >> 23) - 112;
  uint32_t mantissa = magnitude & 0x7fffffu;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

inline float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  }
  uint32_t out;
  std::memcpy(&out, &magnitude, 4);
  out |= sign;
  float result;
  std::memcpy(&result, &out, 4);
  return result;
}

}  // namespace simt

#define __global__
#define __device__
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define threadIdx (::simt::CurrentThread())
#define blockIdx (::simt::machine().block_idx)
#define blockDim (::simt::machine().block_dim)
#define gridDim (::simt::machine().grid_dim)

inline void __syncthreads() { ::simt::SyncThreads(); }
inline float __shfl_xor_sync(unsigned mask, float value, int offset) {
  if (mask != 0xffffffffu) ::simt::Fail("a shuffle with a partial mask");
  return ::simt::Shuffle(value, offset);
}
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
// Round to nearest even, as cvt.rni (the host's rounding mode is nearest).
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline unsigned __float_as_uint(float value) {
  unsigned bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}
inline float __int_as_float(int bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}
inline float __uint_as_float(unsigned bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}
using std::max;
using std::min;

#endif  // KVJIT_CODEGEN_CUDA_EMULATION_SIMTEMULATOR_H_
