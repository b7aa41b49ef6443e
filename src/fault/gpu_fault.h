// GpuFault: thrown by the trainer when the rank's GPU reported an uncorrectable ECC error, a fatal
// XID or a failed row remap (obs::GpuSampler::fault()). `fluxtrain train` reports it to the
// supervisor (heartbeat phase "gpu_fault") and exits with kExitGpuFault; the supervisor excludes
// the rank's host from the restart.
//
//   if (std::string why = telemetry.gpu_fault(); !why.empty()) throw GpuFault(why, hint);
#pragma once

#include "util/error.h"

namespace ft {

class GpuFault : public Error {
 public:
  using Error::Error;
};

}  // namespace ft
