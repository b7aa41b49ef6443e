// NvmlLib: NVIDIA's management library (libnvidia-ml.so.1), loaded at run time with dlopen so
// fluxtrain builds and runs on machines without the driver. Only the entry points the GPU
// sampler reads are resolved; a missing one is a null pointer, not an error.
//
//   std::string why;
//   auto nvml = obs::NvmlLib::open("", &why);   // "" = $FLUXTRAIN_NVML_LIB or libnvidia-ml.so.1
//   if (!nvml) log_info("no GPU metrics: {}", why);
//   unsigned n = 0; nvml->device_get_count(&n);
//
// The declarations below follow NVML's C API (nvml.h); tests load a fake library with the same
// entry points (tests/fake_nvml/) to drive temperatures on machines without GPUs.
#pragma once

#include <memory>
#include <string>

namespace ft::obs {

struct NvmlDeviceStruct;
using NvmlDevice = NvmlDeviceStruct*;  // nvmlDevice_t
using NvmlReturn = int;                // nvmlReturn_t

inline constexpr NvmlReturn kNvmlSuccess = 0;
inline constexpr NvmlReturn kNvmlErrorNotSupported = 3;
inline constexpr NvmlReturn kNvmlErrorInsufficientSize = 7;
inline constexpr NvmlReturn kNvmlErrorTimeout = 10;
inline constexpr int kNvmlTemperatureGpu = 0;        // nvmlTemperatureSensors_t
inline constexpr int kNvmlClockSm = 1;               // nvmlClockType_t
inline constexpr int kNvmlMemoryErrorCorrected = 0;  // nvmlMemoryErrorType_t
inline constexpr int kNvmlMemoryErrorUncorrected = 1;
inline constexpr int kNvmlVolatileEcc = 0;               // nvmlEccCounterType_t
inline constexpr int kNvmlRetiredMultipleSingleBit = 0;  // nvmlPageRetirementCause_t
inline constexpr int kNvmlRetiredDoubleBit = 1;
inline constexpr unsigned long long kNvmlEventTypeXidCriticalError = 0x8;  // nvmlEventType*

struct NvmlEventSetStruct;
using NvmlEventSet = NvmlEventSetStruct*;  // nvmlEventSet_t

struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
struct NvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu, memory;
};
struct NvmlEventData {  // nvmlEventData_t (the layout nvmlEventSetWait_v2 fills)
  NvmlDevice device;
  unsigned long long event_type;
  unsigned long long event_data;  // the XID of an nvmlEventTypeXidCriticalError (999: unknown)
  unsigned int gpu_instance_id, compute_instance_id;
};

class NvmlLib {
 public:
  // Loads and initialises NVML; nullptr (and *why says why) when it is absent or fails to start.
  static std::unique_ptr<NvmlLib> open(const std::string& path, std::string* why);
  ~NvmlLib();  // nvmlShutdown, dlclose
  NvmlLib(const NvmlLib&) = delete;
  NvmlLib& operator=(const NvmlLib&) = delete;

  std::string error_string(NvmlReturn rc) const;
  const std::string& path() const { return path_; }

  NvmlReturn (*device_get_count)(unsigned int*) = nullptr;
  NvmlReturn (*device_get_handle_by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*device_get_name)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*device_get_uuid)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*device_get_temperature)(NvmlDevice, int, unsigned int*) = nullptr;      // Celsius
  NvmlReturn (*device_get_power_usage)(NvmlDevice, unsigned int*) = nullptr;           // milliwatts
  NvmlReturn (*device_get_utilization_rates)(NvmlDevice, NvmlUtilization*) = nullptr;  // percent
  NvmlReturn (*device_get_memory_info)(NvmlDevice, NvmlMemory*) = nullptr;             // bytes
  NvmlReturn (*device_get_clock_info)(NvmlDevice, int, unsigned int*) = nullptr;       // MHz
  // nvmlDeviceGetCurrentClocksEventReasons (drivers 535+), else its older name
  // nvmlDeviceGetCurrentClocksThrottleReasons: same signature, same bits; throttle_fn names the one found.
  NvmlReturn (*device_get_throttle_reasons)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*device_get_total_ecc_errors)(NvmlDevice, int, int, unsigned long long*) = nullptr;
  // (device, corrected rows, uncorrected rows, remap pending, remap failure occurred): Ampere and later.
  NvmlReturn (*device_get_remapped_rows)(NvmlDevice, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  // (device, cause, page count in/out, addresses or null): page retirement, Volta and earlier.
  NvmlReturn (*device_get_retired_pages)(NvmlDevice, int, unsigned*, unsigned long long*) = nullptr;
  // The event API, for XID errors.
  NvmlReturn (*event_set_create)(NvmlEventSet*) = nullptr;
  NvmlReturn (*device_register_events)(NvmlDevice, unsigned long long, NvmlEventSet) = nullptr;
  NvmlReturn (*event_set_wait)(NvmlEventSet, NvmlEventData*, unsigned int) = nullptr;  // _v2; ms
  NvmlReturn (*event_set_free)(NvmlEventSet) = nullptr;

  const char* throttle_fn = "nvmlDeviceGetCurrentClocksEventReasons";  // for log lines

 private:
  NvmlLib() = default;
  void* handle_ = nullptr;
  std::string path_;
  NvmlReturn (*shutdown_)() = nullptr;
  const char* (*error_string_)(NvmlReturn) = nullptr;
};

}  // namespace ft::obs
