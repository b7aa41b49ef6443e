// XID errors: the NVIDIA driver's error codes, as NVML's event API reports them
// (nvmlEventTypeXidCriticalError). A few mean the GPU itself is broken until it is reset or
// serviced; fluxtrain stops the rank on those and the supervisor excludes its host (docs/operations.md).
//
//   if (const XidInfo* x = find_xid(79); x && x->fatal) stop_rank(x->what);
//
// The fatal set follows NVIDIA's XID catalog (docs.nvidia.com/deploy/xid-errors, "Resolution
// Bucket (Immediate Action)": reset the GPU, reboot the node or contact support, on the catalog's
// hardware causes) and its dynamic page retirement notes (XID 48, 64). XIDs the catalog puts down to
// the application (13, 31, 43, 45, ...), and XID 63 (a row remap or page retirement recorded, which
// takes effect at the next reset: counted and alerted on, not fatal), are counted only.
#pragma once

namespace ft::obs {

struct XidInfo {
  unsigned code;
  bool fatal;        // the GPU needs a reset or service: stop the rank, exclude the host
  const char* what;  // a short description for log lines
};

// nullptr for an XID the table does not name (counted, not fatal).
const XidInfo* find_xid(unsigned code);

}  // namespace ft::obs
