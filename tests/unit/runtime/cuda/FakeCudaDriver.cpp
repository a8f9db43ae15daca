// The stand-in libcuda of FakeCudaDriver.h: just the entry points kvjit's
// CudaDriver resolves, with their versioned names (cuda.h maps them).

#include "tests/unit/runtime/cuda/FakeCudaDriver.h"

#include <cuda.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::vector<FakeCudaLaunch>& Launches() {
  static std::vector<FakeCudaLaunch> launches;
  return launches;
}

struct Graph {
  std::vector<FakeCudaLaunch> launches;
};

bool capturing = false;
Graph* capture = nullptr;
int launch_number = 0;
int fail_launch = -1;
size_t memory_limit = static_cast<size_t>(1) << 40;
char last_image = '?';
int graphs_instantiated = 0;
// The launches run so far, never cleared: the fake GPU's clock.
long long launches_run = 0;
float milliseconds_per_launch = 0;

struct Event {
  long long launches_run_before = -1;  // -1 until recorded
};

struct Function {
  std::string name;
};

}  // namespace

extern "C" {

int FakeCuda_LaunchCount() { return static_cast<int>(Launches().size()); }
const FakeCudaLaunch* FakeCuda_Launch(int index) { return &Launches().at(index); }
void FakeCuda_ClearLaunches() {
  Launches().clear();
  launch_number = 0;
}
void FakeCuda_FailLaunch(int number) {
  fail_launch = number;
  launch_number = 0;
}
void FakeCuda_SetMemoryLimit(size_t bytes) { memory_limit = bytes; }
char FakeCuda_LastModuleImage() { return last_image; }
int FakeCuda_GraphsInstantiated() { return graphs_instantiated; }
void FakeCuda_SetMillisecondsPerLaunch(float milliseconds) {
  milliseconds_per_launch = milliseconds;
}

CUresult CUDAAPI cuInit(unsigned int) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuDriverGetVersion(int* version) {
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int* count) {
  *count = 1;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char* name, int length, CUdevice) {
  std::strncpy(name, "Fake GPU", length);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = 132;
      break;
    default:
      *value = 0;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice) {
  *bytes = static_cast<size_t>(80) << 30;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice) {
  *context = reinterpret_cast<CUcontext>(0x1);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int,
                                    CUjit_option*, void**) {
  // An ELF64 image is read with 8-byte loads.
  if (reinterpret_cast<uintptr_t>(image) % 8 != 0) return CUDA_ERROR_INVALID_IMAGE;
  last_image = std::memcmp(image,
                           "\x7f"
                           "ELF",
                           4) == 0
                   ? 'c'
                   : 'p';
  *module = reinterpret_cast<CUmodule>(new int(0));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleUnload(CUmodule module) {
  delete reinterpret_cast<int*>(module);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleGetFunction(CUfunction* function, CUmodule, const char* name) {
  // Leaked: functions live as long as the process, as the test needs.
  *function = reinterpret_cast<CUfunction>(new Function{name});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }

CUresult CUDAAPI cuLaunchKernel(CUfunction function, unsigned grid_x, unsigned grid_y,
                                unsigned grid_z, unsigned block_x, unsigned block_y,
                                unsigned block_z, unsigned shared, CUstream, void** params,
                                void**) {
  if (launch_number++ == fail_launch) return CUDA_ERROR_LAUNCH_FAILED;
  FakeCudaLaunch launch = {};
  std::strncpy(launch.kernel, reinterpret_cast<Function*>(function)->name.c_str(),
               sizeof(launch.kernel) - 1);
  launch.grid[0] = grid_x;
  launch.grid[1] = grid_y;
  launch.grid[2] = grid_z;
  launch.block[0] = block_x;
  launch.block[1] = block_y;
  launch.block[2] = block_z;
  launch.shared_bytes = shared;
  std::memcpy(launch.args, params[0], sizeof(launch.args));
  if (capturing) {
    capture->launches.push_back(launch);
  } else {
    Launches().push_back(launch);
    ++launches_run;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetInfo(size_t* free, size_t* total) {
  *free = *total = memory_limit;
  return CUDA_SUCCESS;
}
// Allocations are among the calls a stream capture (in the global or
// thread-local mode) forbids.
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* pointer, size_t bytes) {
  if (capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (bytes > memory_limit) return CUDA_ERROR_OUT_OF_MEMORY;
  void* memory = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (memory == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr pointer) {
  std::free(reinterpret_cast<void*>(pointer));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAllocHost(void** pointer, size_t bytes) {
  if (capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  *pointer = std::malloc(bytes);
  return *pointer != nullptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuMemFreeHost(void* pointer) {
  std::free(pointer);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr destination, const void* source, size_t bytes,
                                   CUstream) {
  if (capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  std::memcpy(reinterpret_cast<void*>(destination), source, bytes);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void* destination, CUdeviceptr source, size_t bytes, CUstream) {
  if (capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  std::memcpy(destination, reinterpret_cast<const void*>(source), bytes);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr destination, CUdeviceptr source, size_t bytes,
                                   CUstream) {
  if (capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  std::memmove(reinterpret_cast<void*>(destination), reinterpret_cast<const void*>(source), bytes);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr destination, unsigned char value, size_t bytes,
                                 CUstream) {
  std::memset(reinterpret_cast<void*>(destination), value, bytes);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream* stream, unsigned int) {
  *stream = reinterpret_cast<CUstream>(0x2);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamSynchronize(CUstream) {
  return capturing ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamQuery(CUstream) {
  return capturing ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamBeginCapture(CUstream, CUstreamCaptureMode) {
  if (capturing) return CUDA_ERROR_ILLEGAL_STATE;
  capturing = true;
  capture = new Graph;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamEndCapture(CUstream, CUgraph* graph) {
  if (!capturing) return CUDA_ERROR_ILLEGAL_STATE;
  capturing = false;
  *graph = reinterpret_cast<CUgraph>(capture);
  capture = nullptr;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  *exec = reinterpret_cast<CUgraphExec>(new Graph(*reinterpret_cast<Graph*>(graph)));
  ++graphs_instantiated;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec exec, CUstream) {
  for (FakeCudaLaunch launch : reinterpret_cast<Graph*>(exec)->launches) {
    launch.from_graph = 1;
    Launches().push_back(launch);
    ++launches_run;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphDestroy(CUgraph graph) {
  delete reinterpret_cast<Graph*>(graph);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec exec) {
  delete reinterpret_cast<Graph*>(exec);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent* event, unsigned int) {
  *event = reinterpret_cast<CUevent>(new Event);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy(CUevent event) {
  delete reinterpret_cast<Event*>(event);
  return CUDA_SUCCESS;
}
// The runner records no event into a graph; this stand-in does not model it.
CUresult CUDAAPI cuEventRecord(CUevent event, CUstream) {
  if (capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  reinterpret_cast<Event*>(event)->launches_run_before = launches_run;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventElapsedTime(float* milliseconds, CUevent start, CUevent end) {
  const Event& from = *reinterpret_cast<Event*>(start);
  const Event& to = *reinterpret_cast<Event*>(end);
  if (from.launches_run_before < 0 || to.launches_run_before < 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *milliseconds =
      static_cast<float>(to.launches_run_before - from.launches_run_before) * milliseconds_per_launch;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult result, const char** name) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      *name = "CUDA_ERROR_OUT_OF_MEMORY";
      break;
    case CUDA_ERROR_LAUNCH_FAILED:
      *name = "CUDA_ERROR_LAUNCH_FAILED";
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult result, const char** description) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      *description = "out of memory";
      break;
    case CUDA_ERROR_LAUNCH_FAILED:
      *description = "unspecified launch failure";
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

}  // extern "C"
