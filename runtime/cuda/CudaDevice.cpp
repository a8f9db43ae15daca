#include "runtime/cuda/CudaDevice.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cuda/ModuleImage.h"

namespace kvjit::cuda {
namespace {

std::string Gib(uint64_t bytes) {
  return absl::StrFormat("%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
}

}  // namespace

DeviceAllocation& DeviceAllocation::operator=(DeviceAllocation&& other) noexcept {
  if (this != &other) {
    if (base_ != 0) driver_->cuMemFree(base_);
    driver_ = std::exchange(other.driver_, nullptr);
    base_ = std::exchange(other.base_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceAllocation::~DeviceAllocation() {
  if (base_ != 0) driver_->cuMemFree(base_);
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) driver_->cuMemFreeHost(data_);
    driver_ = std::exchange(other.driver_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) driver_->cuMemFreeHost(data_);
}

LoadedModule& LoadedModule::operator=(LoadedModule&& other) noexcept {
  if (this != &other) {
    if (module_ != nullptr) driver_->cuModuleUnload(module_);
    driver_ = std::exchange(other.driver_, nullptr);
    module_ = std::exchange(other.module_, nullptr);
  }
  return *this;
}

LoadedModule::~LoadedModule() {
  if (module_ != nullptr) driver_->cuModuleUnload(module_);
}

GraphExec& GraphExec::operator=(GraphExec&& other) noexcept {
  if (this != &other) {
    if (exec_ != nullptr) driver_->cuGraphExecDestroy(exec_);
    driver_ = std::exchange(other.driver_, nullptr);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

GraphExec::~GraphExec() {
  if (exec_ != nullptr) driver_->cuGraphExecDestroy(exec_);
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) driver_->cuEventDestroy(event_);
    driver_ = std::exchange(other.driver_, nullptr);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

Event::~Event() {
  if (event_ != nullptr) driver_->cuEventDestroy(event_);
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(int ordinal) {
  KVJIT_ASSIGN_OR_RETURN(const CudaDriver* driver, CudaDriver::Get());
  int count = 0;
  KVJIT_CU_RETURN_IF_ERROR(*driver, cuDeviceGetCount(&count));
  if (ordinal < 0 || ordinal >= count) {
    return absl::NotFoundError(absl::StrCat("no CUDA device cuda:", ordinal, ": this machine has ",
                                            count, count == 1 ? " GPU" : " GPUs"));
  }
  std::unique_ptr<CudaDevice> device(new CudaDevice(driver, ordinal));
  KVJIT_CU_RETURN_IF_ERROR(*driver, cuDeviceGet(&device->device_, ordinal));
  char name[256] = {};
  KVJIT_CU_RETURN_IF_ERROR(*driver, cuDeviceGetName(name, sizeof(name) - 1, device->device_));
  device->name_ = name;
  int major = 0;
  int minor = 0;
  KVJIT_CU_RETURN_IF_ERROR(
      *driver,
      cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device->device_));
  KVJIT_CU_RETURN_IF_ERROR(
      *driver,
      cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device->device_));
  device->arch_ = major * 10 + minor;
  KVJIT_CU_RETURN_IF_ERROR(
      *driver, cuDeviceGetAttribute(&device->multiprocessors_,
                                    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device->device_));
  size_t total = 0;
  KVJIT_CU_RETURN_IF_ERROR(*driver, cuDeviceTotalMem(&total, device->device_));
  device->total_memory_ = total;
  KVJIT_CU_RETURN_IF_ERROR(*driver, cuDevicePrimaryCtxRetain(&device->context_, device->device_));
  KVJIT_RETURN_IF_ERROR(device->MakeCurrent());
  KVJIT_CU_RETURN_IF_ERROR(*driver, cuStreamCreate(&device->stream_, CU_STREAM_NON_BLOCKING));
  return device;
}

CudaDevice::~CudaDevice() {
  if (context_ == nullptr) return;
  // Pending work must finish before the stream goes; errors here have no one
  // to go to (the runner reported the step's own errors).
  if (driver_->cuCtxSetCurrent(context_) == CUDA_SUCCESS && stream_ != nullptr) {
    driver_->cuStreamSynchronize(stream_);
    driver_->cuStreamDestroy(stream_);
  }
  driver_->cuDevicePrimaryCtxRelease(device_);
}

std::string CudaDevice::Describe() const {
  return absl::StrCat("cuda:", ordinal_, " (", name_, ", sm_", arch_, ", ", multiprocessors_,
                      " SMs, ", Gib(total_memory_), ")");
}

absl::Status CudaDevice::MakeCurrent() const {
  KVJIT_CU_RETURN_IF_ERROR(*driver_, cuCtxSetCurrent(context_));
  return absl::OkStatus();
}

absl::StatusOr<DeviceAllocation> CudaDevice::Allocate(uint64_t bytes,
                                                      absl::string_view what) const {
  CUdeviceptr base = 0;
  const CUresult result = driver_->cuMemAlloc(&base, bytes);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    size_t free = 0;
    size_t total = 0;
    std::string memory = "its free memory is unknown";
    if (driver_->cuMemGetInfo(&free, &total) == CUDA_SUCCESS) {
      memory = absl::StrCat(Gib(free), " of ", Gib(total), " free");
    }
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", Gib(bytes), " on ",
                                                     Describe(), " for ", what, ": ", memory));
  }
  KVJIT_RETURN_IF_ERROR(driver_->Check(result, absl::StrCat("cuMemAlloc for ", what)));
  return DeviceAllocation(driver_, base, bytes);
}

absl::StatusOr<PinnedBuffer> CudaDevice::AllocatePinned(uint64_t bytes,
                                                        absl::string_view what) const {
  void* data = nullptr;
  KVJIT_RETURN_IF_ERROR(driver_->Check(driver_->cuMemAllocHost(&data, bytes),
                                       absl::StrCat("cuMemAllocHost for ", what)));
  return PinnedBuffer(driver_, data, bytes);
}

absl::Status CudaDevice::CopyToDevice(CUdeviceptr destination, const void* source,
                                      uint64_t bytes) const {
  if (bytes == 0) return absl::OkStatus();
  KVJIT_CU_RETURN_IF_ERROR(*driver_, cuMemcpyHtoDAsync(destination, source, bytes, stream_));
  return absl::OkStatus();
}

absl::Status CudaDevice::CopyToHost(void* destination, CUdeviceptr source, uint64_t bytes) const {
  if (bytes == 0) return absl::OkStatus();
  KVJIT_CU_RETURN_IF_ERROR(*driver_, cuMemcpyDtoHAsync(destination, source, bytes, stream_));
  return absl::OkStatus();
}

absl::Status CudaDevice::CopyOnDevice(CUdeviceptr destination, CUdeviceptr source,
                                      uint64_t bytes) const {
  if (bytes == 0) return absl::OkStatus();
  KVJIT_CU_RETURN_IF_ERROR(*driver_, cuMemcpyDtoDAsync(destination, source, bytes, stream_));
  return absl::OkStatus();
}

absl::Status CudaDevice::Zero(CUdeviceptr destination, uint64_t bytes) const {
  if (bytes == 0) return absl::OkStatus();
  KVJIT_CU_RETURN_IF_ERROR(*driver_, cuMemsetD8Async(destination, 0, bytes, stream_));
  return absl::OkStatus();
}

absl::Status CudaDevice::Synchronize() const {
  KVJIT_CU_RETURN_IF_ERROR(*driver_, cuStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::StatusOr<bool> CudaDevice::StreamFinished() const {
  const CUresult result = driver_->cuStreamQuery(stream_);
  if (result == CUDA_ERROR_NOT_READY) return false;
  KVJIT_RETURN_IF_ERROR(driver_->Check(result, "cuStreamQuery"));
  return true;
}

absl::StatusOr<LoadedModule> CudaDevice::LoadModule(absl::Span<const uint8_t> cubin, int cubin_arch,
                                                    absl::string_view ptx, int ptx_arch) const {
  KVJIT_ASSIGN_OR_RETURN(ModuleImage image, ChooseModuleImage(arch_, cubin.empty() ? 0 : cubin_arch,
                                                              ptx.empty() ? 0 : ptx_arch));
  // The driver reads a PTX image up to its NUL, and a cubin as an ELF64
  // image, whose headers hold 8-byte fields: inside the executable the cubin
  // is only 4-byte aligned, so it is loaded from an aligned copy.
  const std::string ptx_text(image == ModuleImage::kPtx ? ptx : absl::string_view());
  std::vector<uint64_t> aligned_cubin;
  if (image == ModuleImage::kCubin) {
    aligned_cubin.resize((cubin.size() + sizeof(uint64_t) - 1) / sizeof(uint64_t));
    std::memcpy(aligned_cubin.data(), cubin.data(), cubin.size());
  }
  const void* data = image == ModuleImage::kCubin ? static_cast<const void*>(aligned_cubin.data())
                                                  : static_cast<const void*>(ptx_text.c_str());
  char log[8192] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(log) - 1))};
  CUmodule module = nullptr;
  absl::Status status = driver_->Check(
      driver_->cuModuleLoadDataEx(&module, data, 2, options, values),
      image == ModuleImage::kCubin
          ? absl::StrCat("loading the sm_", cubin_arch, " cubin (cuModuleLoadDataEx)")
          : absl::StrCat("JIT-compiling the compute_", ptx_arch, " PTX for sm_", arch_,
                         " (cuModuleLoadDataEx)"));
  if (!status.ok()) {
    return absl::Status(status.code(), log[0] != '\0' ? absl::StrCat(status.message(), ":\n", log)
                                                      : std::string(status.message()));
  }
  return LoadedModule(driver_, module);
}

absl::StatusOr<CUfunction> CudaDevice::GetFunction(const LoadedModule& module,
                                                   const std::string& name) const {
  CUfunction function = nullptr;
  KVJIT_RETURN_IF_ERROR(
      driver_->Check(driver_->cuModuleGetFunction(&function, module.get(), name.c_str()),
                     absl::StrCat("finding kernel '", name, "' (cuModuleGetFunction)")));
  return function;
}

absl::Status CudaDevice::SetDynamicSharedMemory(CUfunction function, int bytes) const {
  KVJIT_CU_RETURN_IF_ERROR(
      *driver_,
      cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes));
  return absl::OkStatus();
}

absl::Status CudaDevice::Launch(CUfunction function, const LaunchDims& dims, void** params) const {
  KVJIT_CU_RETURN_IF_ERROR(
      *driver_,
      cuLaunchKernel(function, dims.grid[0], dims.grid[1], dims.grid[2], dims.block[0],
                     dims.block[1], dims.block[2], dims.shared_bytes, stream_, params, nullptr));
  return absl::OkStatus();
}

absl::Status CudaDevice::BeginCapture() const {
  KVJIT_CU_RETURN_IF_ERROR(*driver_,
                           cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  return absl::OkStatus();
}

absl::StatusOr<GraphExec> CudaDevice::EndCapture() const {
  CUgraph graph = nullptr;
  KVJIT_CU_RETURN_IF_ERROR(*driver_, cuStreamEndCapture(stream_, &graph));
  CUgraphExec exec = nullptr;
  const CUresult instantiated = driver_->cuGraphInstantiate(&exec, graph, 0);
  driver_->cuGraphDestroy(graph);
  KVJIT_RETURN_IF_ERROR(driver_->Check(instantiated, "cuGraphInstantiate"));
  return GraphExec(driver_, exec);
}

absl::Status CudaDevice::LaunchGraph(const GraphExec& graph) const {
  KVJIT_CU_RETURN_IF_ERROR(*driver_, cuGraphLaunch(graph.get(), stream_));
  return absl::OkStatus();
}

absl::StatusOr<Event> CudaDevice::CreateEvent() const {
  CUevent event = nullptr;
  KVJIT_CU_RETURN_IF_ERROR(*driver_, cuEventCreate(&event, CU_EVENT_DEFAULT));
  return Event(driver_, event);
}

absl::Status CudaDevice::Record(const Event& event) const {
  KVJIT_CU_RETURN_IF_ERROR(*driver_, cuEventRecord(event.get(), stream_));
  return absl::OkStatus();
}

absl::StatusOr<float> CudaDevice::ElapsedMilliseconds(const Event& start, const Event& end) const {
  float milliseconds = 0;
  KVJIT_CU_RETURN_IF_ERROR(*driver_, cuEventElapsedTime(&milliseconds, start.get(), end.get()));
  return milliseconds;
}

}  // namespace kvjit::cuda
