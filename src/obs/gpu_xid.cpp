#include "obs/gpu_xid.h"

namespace ft::obs {
namespace {

constexpr XidInfo kXids[] = {
    {13, false, "graphics engine exception (usually the application)"},
    {31, false, "GPU memory page fault (usually the application)"},
    {43, false, "GPU stopped processing (usually the application)"},
    {45, false, "preemptive cleanup after an earlier error"},
    {48, true, "double-bit (uncorrectable) ECC error"},
    {63, false, "row remap or page retirement recorded (takes effect at the next GPU reset)"},
    {64, true, "row remap or page retirement failed"},
    {74, true, "NVLink error"},
    {79, true, "GPU has fallen off the bus"},
    {92, true, "high single-bit ECC error rate"},
    {94, false, "contained ECC error (the affected application is stopped; the GPU stays usable)"},
    {95, true, "uncontained ECC error"},
    {119, true, "GSP RPC timeout"},
    {120, true, "GSP error"},
    {140, true, "unrecovered ECC error"},
    {154, true, "GPU recovery action changed: the GPU needs a reset or the node a reboot"},
};

}  // namespace

const XidInfo* find_xid(unsigned code) {
  for (const XidInfo& x : kXids)
    if (x.code == code) return &x;
  return nullptr;
}

}  // namespace ft::obs
