#ifndef KVJIT_TESTS_UNIT_RUNTIME_CUDA_FAKECUDADRIVER_H_
#define KVJIT_TESTS_UNIT_RUNTIME_CUDA_FAKECUDADRIVER_H_

// A stand-in for libcuda on machines without a GPU: device memory is host
// memory, copies happen at once, and kernel launches are recorded instead of
// run (captured into graphs and replayed as the driver would). Tests load it
// through $KVJIT_CUDA_DRIVER and inspect what the runner asked of the GPU.

#include <cstddef>
#include <cstdint>

extern "C" {

struct FakeCudaLaunch {
  char kernel[128];
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  unsigned char args[144];  // the LaunchArgs, as passed
  int from_graph;           // replayed from an instantiated graph
};

// The launches that ran (not those captured), in order.
int FakeCuda_LaunchCount();
const FakeCudaLaunch* FakeCuda_Launch(int index);
void FakeCuda_ClearLaunches();

// The launch with this number (counting from 0 from now on) fails with
// CUDA_ERROR_LAUNCH_FAILED; -1 turns it off.
void FakeCuda_FailLaunch(int number);
// Allocations above this many bytes fail with CUDA_ERROR_OUT_OF_MEMORY.
void FakeCuda_SetMemoryLimit(size_t bytes);
// 'c' when the last module loaded was a cubin (ELF), 'p' when PTX.
char FakeCuda_LastModuleImage();
int FakeCuda_GraphsInstantiated();
// Each launch that runs takes this long on the fake GPU's clock, which
// events read: the time between two events is this times the launches that
// ran between their records. 0 at first.
void FakeCuda_SetMillisecondsPerLaunch(float milliseconds);

}  // extern "C"

#endif  // KVJIT_TESTS_UNIT_RUNTIME_CUDA_FAKECUDADRIVER_H_
