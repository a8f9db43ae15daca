#ifndef KVJIT_RUNTIME_CUDA_CUDADEVICE_H_
#define KVJIT_RUNTIME_CUDA_CUDADEVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/cuda/CudaDriver.h"

namespace kvjit::cuda {

// Device memory from one cuMemAlloc, freed on destruction.
class DeviceAllocation {
 public:
  DeviceAllocation() = default;
  DeviceAllocation(const CudaDriver* driver, CUdeviceptr base, uint64_t bytes)
      : driver_(driver), base_(base), bytes_(bytes) {}
  DeviceAllocation(DeviceAllocation&& other) noexcept { *this = std::move(other); }
  DeviceAllocation& operator=(DeviceAllocation&& other) noexcept;
  ~DeviceAllocation();

  CUdeviceptr base() const { return base_; }
  uint64_t bytes() const { return bytes_; }

 private:
  const CudaDriver* driver_ = nullptr;
  CUdeviceptr base_ = 0;
  uint64_t bytes_ = 0;
};

// Page-locked host memory (cuMemAllocHost), so that copies on the stream are
// asynchronous DMA; freed on destruction.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const CudaDriver* driver, void* data, uint64_t bytes)
      : driver_(driver), data_(data), bytes_(bytes) {}
  PinnedBuffer(PinnedBuffer&& other) noexcept { *this = std::move(other); }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  ~PinnedBuffer();

  void* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }

 private:
  const CudaDriver* driver_ = nullptr;
  void* data_ = nullptr;
  uint64_t bytes_ = 0;
};

// A loaded module, unloaded on destruction.
class LoadedModule {
 public:
  LoadedModule() = default;
  LoadedModule(const CudaDriver* driver, CUmodule module) : driver_(driver), module_(module) {}
  LoadedModule(LoadedModule&& other) noexcept { *this = std::move(other); }
  LoadedModule& operator=(LoadedModule&& other) noexcept;
  ~LoadedModule();

  CUmodule get() const { return module_; }

 private:
  const CudaDriver* driver_ = nullptr;
  CUmodule module_ = nullptr;
};

// An instantiated CUDA graph, destroyed on destruction.
class GraphExec {
 public:
  GraphExec() = default;
  GraphExec(const CudaDriver* driver, CUgraphExec exec) : driver_(driver), exec_(exec) {}
  GraphExec(GraphExec&& other) noexcept { *this = std::move(other); }
  GraphExec& operator=(GraphExec&& other) noexcept;
  ~GraphExec();

  CUgraphExec get() const { return exec_; }

 private:
  const CudaDriver* driver_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// A CUDA event (timing enabled), destroyed on destruction.
class Event {
 public:
  Event() = default;
  Event(const CudaDriver* driver, CUevent event) : driver_(driver), event_(event) {}
  Event(Event&& other) noexcept { *this = std::move(other); }
  Event& operator=(Event&& other) noexcept;
  ~Event();

  CUevent get() const { return event_; }

 private:
  const CudaDriver* driver_ = nullptr;
  CUevent event_ = nullptr;
};

struct LaunchDims {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
};

// One GPU: its primary context (shared with the CUDA runtime, and so with
// cuBLAS) and one non-blocking stream on which every copy, launch and graph
// of the runner is ordered. Not thread-safe: one runner drives it.
class CudaDevice {
 public:
  // Device `ordinal` (0 for the first GPU); an error when there is no driver,
  // no GPU, or no such ordinal.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(int ordinal);
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  const CudaDriver& driver() const { return *driver_; }
  CUstream stream() const { return stream_; }
  int ordinal() const { return ordinal_; }
  const std::string& name() const { return name_; }
  // Compute capability × 10: 90 for sm_90.
  int arch() const { return arch_; }
  int multiprocessors() const { return multiprocessors_; }
  uint64_t total_memory() const { return total_memory_; }
  // "cuda:0 (NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GiB)".
  std::string Describe() const;

  // Makes the device's context current on the calling thread; every entry
  // point of the runner calls it first, so any thread may drive the runner.
  absl::Status MakeCurrent() const;

  // `bytes` of device memory; out of memory names `what` and the free and
  // total memory of the device.
  absl::StatusOr<DeviceAllocation> Allocate(uint64_t bytes, absl::string_view what) const;
  absl::StatusOr<PinnedBuffer> AllocatePinned(uint64_t bytes, absl::string_view what) const;

  // Copies ordered on the stream; the host side of a copy must stay valid
  // (and, to host, is complete) only after Synchronize().
  absl::Status CopyToDevice(CUdeviceptr destination, const void* source, uint64_t bytes) const;
  absl::Status CopyToHost(void* destination, CUdeviceptr source, uint64_t bytes) const;
  absl::Status CopyOnDevice(CUdeviceptr destination, CUdeviceptr source, uint64_t bytes) const;
  absl::Status Zero(CUdeviceptr destination, uint64_t bytes) const;
  absl::Status Synchronize() const;
  // Whether the stream's work is all done, without waiting (cuStreamQuery);
  // an error where it failed. For waits that must not block forever
  // (DeviceCommunicator::AwaitStream).
  absl::StatusOr<bool> StreamFinished() const;

  // A module from an executable's images: the cubin when it was built for
  // this GPU's architecture, else the PTX JIT-compiled by the driver (see
  // ChooseModuleImage). `ptx` must be NUL-terminated.
  absl::StatusOr<LoadedModule> LoadModule(absl::Span<const uint8_t> cubin, int cubin_arch,
                                          absl::string_view ptx, int ptx_arch) const;
  absl::StatusOr<CUfunction> GetFunction(const LoadedModule& module, const std::string& name) const;
  // Lets `function` use `bytes` of dynamic shared memory (above 48 KiB needs
  // the opt-in).
  absl::Status SetDynamicSharedMemory(CUfunction function, int bytes) const;
  absl::Status Launch(CUfunction function, const LaunchDims& dims, void** params) const;

  // Records the stream's work between BeginCapture and EndCapture into a
  // graph (nothing runs while capturing) and instantiates it.
  absl::Status BeginCapture() const;
  absl::StatusOr<GraphExec> EndCapture() const;
  absl::Status LaunchGraph(const GraphExec& graph) const;

  // Events mark points of the stream's work: ElapsedMilliseconds between
  // two recorded ones is the GPU's time between them, readable once the
  // stream has passed both (after Synchronize).
  absl::StatusOr<Event> CreateEvent() const;
  absl::Status Record(const Event& event) const;
  absl::StatusOr<float> ElapsedMilliseconds(const Event& start, const Event& end) const;

 private:
  CudaDevice(const CudaDriver* driver, int ordinal) : driver_(driver), ordinal_(ordinal) {}

  const CudaDriver* driver_;
  int ordinal_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  std::string name_;
  int arch_ = 0;
  int multiprocessors_ = 0;
  uint64_t total_memory_ = 0;
};

}  // namespace kvjit::cuda

#endif  // KVJIT_RUNTIME_CUDA_CUDADEVICE_H_
