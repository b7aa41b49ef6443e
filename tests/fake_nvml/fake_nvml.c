/* A stand-in for libnvidia-ml.so.1 with the entry points fluxtrain's GPU sampler uses, so tests
 * can drive GPU temperatures (and failures) on machines without GPUs.
 *
 *   FLUXTRAIN_NVML_LIB=build/tests/fake_nvml/libfake_nvml.so FAKE_NVML_STATE=/tmp/gpus.txt ...
 *
 * The state file is re-read on every call, one "key value" per line (absent keys take defaults):
 *   devices 2                  number of GPUs (default 1)
 *   init_fail 1                nvmlInit_v2 returns NVML_ERROR_DRIVER_NOT_LOADED
 *   temp.0 85                  GPU 0 temperature in C (default 40)
 *   power_w.0 300.5            power in watts (default 100)
 *   util.0 97                  utilisation in percent (default 50)
 *   mem_used.0 1073741824      bytes (default 1 GiB); mem_total.0 (default 80 GiB)
 *   sm_mhz.0 1410              SM clock in MHz (default 1500)
 *   throttle.0 0x48            throttle-reason bit mask (default 0)
 *   ecc_corrected.0 3          volatile ECC counts (default 0); ecc_uncorrected.0
 *   name.0 NVIDIA H100 80GB HBM3   product name, the rest of the line (default "Fake GPU 0")
 *   uuid.0 GPU-5e1f...         UUID (default GPU-fake-0000)
 *   fail.nvmlDeviceGetPowerUsage 1    that call returns NVML_ERROR_UNKNOWN on every GPU
 *   remap_corr.0 2 / remap_unc.0 1 / remap_pending.0 1 / remap_failure.0 1   nvmlDeviceGetRemappedRows
 *                              (default 0s); remap_unsupported.0 1: NVML_ERROR_NOT_SUPPORTED (pre-Ampere)
 *   retired_sbe.0 3 / retired_dbe.0 1   nvmlDeviceGetRetiredPages; without either key the call is
 *                              NVML_ERROR_NOT_SUPPORTED (an Ampere or later GPU remaps rows instead)
 *   xid.0 13,79                XID errors of GPU 0, in order: each is delivered once (per process) by
 *                              nvmlEventSetWait_v2 to a set registered for XID events; append to the
 *                              list to raise another (registering a GPU starts its list over).
 *                              xid_unsupported 1: nvmlDeviceRegisterEvents fails
 * FAKE_NVML_STATE (or FLUXTRAIN_FAKE_NVML_STATE, which `fluxtrain launch` forwards to the ranks of
 * every host as it does all FLUXTRAIN_* variables) may contain "{rank}": replaced by the MPI rank
 * ($OMPI_COMM_WORLD_RANK, $PMI_RANK or $SLURM_PROCID; "none" outside MPI), so one rank of a job can
 * be given a failing GPU, and "{attempt}": replaced by $FLUXTRAIN_ATTEMPT (the supervisor's attempt
 * number; "none" outside it), so the GPU can fail in one attempt only.
 * fake_nvml_calls("nvmlDeviceGetPowerUsage") counts the calls made (tests check no retries). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEV 16
#define OK 0
#define ERR_INVALID_ARGUMENT 2
#define ERR_NOT_SUPPORTED 3
#define ERR_INSUFFICIENT_SIZE 7
#define ERR_DRIVER_NOT_LOADED 9
#define ERR_TIMEOUT 10
#define ERR_UNKNOWN 999

typedef struct { int index; } dev_t_;
static dev_t_ g_devs[MAX_DEV];

typedef struct { unsigned long long total, free, used; } mem_t_;
typedef struct { unsigned int gpu, memory; } util_t_;

/* Call counters by function name. */
static struct { const char* fn; long n; } g_calls[32];
static int g_ncalls;
static void count_call(const char* fn) {
  for (int i = 0; i < g_ncalls; ++i)
    if (strcmp(g_calls[i].fn, fn) == 0) { g_calls[i].n++; return; }
  if (g_ncalls < 32) { g_calls[g_ncalls].fn = fn; g_calls[g_ncalls].n = 1; g_ncalls++; }
}
long fake_nvml_calls(const char* fn) {
  for (int i = 0; i < g_ncalls; ++i)
    if (strcmp(g_calls[i].fn, fn) == 0) return g_calls[i].n;
  return 0;
}

/* `in` with every `key` replaced by `value` into out. */
static void substitute(const char* in, const char* key, const char* value, char* out, size_t len) {
  size_t n = 0, k = strlen(key);
  while (*in && n + 1 < len) {
    if (strncmp(in, key, k) == 0) {
      n += (size_t)snprintf(out + n, len - n, "%s", value);
      in += k;
    } else {
      out[n++] = *in++;
    }
  }
  out[n < len ? n : len - 1] = 0;
}

/* The state file's path: $FAKE_NVML_STATE with "{rank}" replaced by this process's MPI rank and
 * "{attempt}" by the supervisor's attempt number. */
static const char* state_path(void) {
  static char buf[1024];
  char tmp[1024];
  const char* p = getenv("FAKE_NVML_STATE");
  if (!p) p = getenv("FLUXTRAIN_FAKE_NVML_STATE"); /* the supervisor forwards FLUXTRAIN_* to every host */
  if (!p) return NULL;
  const char* rank = getenv("OMPI_COMM_WORLD_RANK");
  if (!rank) rank = getenv("PMI_RANK");
  if (!rank) rank = getenv("SLURM_PROCID");
  const char* attempt = getenv("FLUXTRAIN_ATTEMPT");
  substitute(p, "{rank}", rank ? rank : "none", tmp, sizeof tmp);
  substitute(tmp, "{attempt}", attempt ? attempt : "none", buf, sizeof buf);
  return buf;
}

/* Looks `key` up in the state file; returns 1 and sets *out when present. */
static int lookup(const char* key, double* out) {
  const char* path = state_path();
  if (!path) return 0;
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  char line[256], k[128];
  int found = 0;
  while (fgets(line, sizeof line, f)) {
    char v[64];
    if (sscanf(line, "%127s %63s", k, v) == 2 && strcmp(k, key) == 0) {
      *out = strtod(v, NULL);
      if (strncmp(v, "0x", 2) == 0) *out = (double)strtoull(v, NULL, 16);
      found = 1;
    }
  }
  fclose(f);
  return found;
}
/* The rest of the line after `key.dev` (trimmed) into buf; 1 when present. */
static int lookup_text(const char* key, int dev, char* buf, unsigned len) {
  const char* path = state_path();
  char k[128], line[256];
  int found = 0;
  snprintf(k, sizeof k, "%s.%d", key, dev);
  FILE* f = path ? fopen(path, "r") : NULL;
  if (!f) return 0;
  while (fgets(line, sizeof line, f)) {
    size_t n = strlen(k);
    if (strncmp(line, k, n) == 0 && (line[n] == ' ' || line[n] == '\t')) {
      char* v = line + n;
      while (*v == ' ' || *v == '\t') ++v;
      v[strcspn(v, "\r\n")] = 0;
      snprintf(buf, len, "%s", v);
      found = 1;
    }
  }
  fclose(f);
  return found;
}
static double value(const char* key, int dev, double dflt) {
  char k[128];
  double v;
  if (dev >= 0) snprintf(k, sizeof k, "%s.%d", key, dev); else snprintf(k, sizeof k, "%s", key);
  return lookup(k, &v) ? v : dflt;
}
static int failing(const char* fn) {
  char k[128];
  double v;
  snprintf(k, sizeof k, "fail.%s", fn);
  return lookup(k, &v) && v != 0;
}
static int ndev(void) {
  int n = (int)value("devices", -1, 1);
  return n < 0 ? 0 : n > MAX_DEV ? MAX_DEV : n;
}
#define ENTER(fn) do { count_call(fn); if (failing(fn)) return ERR_UNKNOWN; } while (0)
#define DEV(d) (((dev_t_*)(d))->index)

int nvmlInit_v2(void) {
  count_call("nvmlInit_v2");
  return value("init_fail", -1, 0) != 0 ? ERR_DRIVER_NOT_LOADED : OK;
}
int nvmlShutdown(void) { count_call("nvmlShutdown"); return OK; }
const char* nvmlErrorString(int rc) {
  switch (rc) {
    case OK: return "Success";
    case ERR_INVALID_ARGUMENT: return "Invalid Argument";
    case ERR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}
int nvmlDeviceGetCount_v2(unsigned int* n) { ENTER("nvmlDeviceGetCount_v2"); *n = (unsigned)ndev(); return OK; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** dev) {
  ENTER("nvmlDeviceGetHandleByIndex_v2");
  if ((int)i >= ndev()) return ERR_INVALID_ARGUMENT;
  g_devs[i].index = (int)i;
  *dev = &g_devs[i];
  return OK;
}
int nvmlDeviceGetName(void* d, char* buf, unsigned int len) {
  ENTER("nvmlDeviceGetName");
  if (!lookup_text("name", DEV(d), buf, len)) snprintf(buf, len, "Fake GPU %d", DEV(d));
  return OK;
}
int nvmlDeviceGetUUID(void* d, char* buf, unsigned int len) {
  ENTER("nvmlDeviceGetUUID");
  if (!lookup_text("uuid", DEV(d), buf, len)) snprintf(buf, len, "GPU-fake-%04d", DEV(d));
  return OK;
}
int nvmlDeviceGetTemperature(void* d, int sensor, unsigned int* t) {
  ENTER("nvmlDeviceGetTemperature");
  if (sensor != 0) return ERR_INVALID_ARGUMENT;
  *t = (unsigned)value("temp", DEV(d), 40);
  return OK;
}
int nvmlDeviceGetPowerUsage(void* d, unsigned int* mw) {
  ENTER("nvmlDeviceGetPowerUsage");
  *mw = (unsigned)(value("power_w", DEV(d), 100) * 1000 + 0.5);
  return OK;
}
int nvmlDeviceGetUtilizationRates(void* d, util_t_* u) {
  ENTER("nvmlDeviceGetUtilizationRates");
  u->gpu = (unsigned)value("util", DEV(d), 50);
  u->memory = 10;
  return OK;
}
int nvmlDeviceGetMemoryInfo(void* d, mem_t_* m) {
  ENTER("nvmlDeviceGetMemoryInfo");
  m->total = (unsigned long long)value("mem_total", DEV(d), 80.0 * (1ull << 30));
  m->used = (unsigned long long)value("mem_used", DEV(d), 1.0 * (1ull << 30));
  m->free = m->total - m->used;
  return OK;
}
int nvmlDeviceGetClockInfo(void* d, int type, unsigned int* mhz) {
  ENTER("nvmlDeviceGetClockInfo");
  if (type != 1) return ERR_INVALID_ARGUMENT; /* NVML_CLOCK_SM */
  *mhz = (unsigned)value("sm_mhz", DEV(d), 1500);
  return OK;
}
int nvmlDeviceGetCurrentClocksEventReasons(void* d, unsigned long long* mask) {
  ENTER("nvmlDeviceGetCurrentClocksEventReasons");
  *mask = (unsigned long long)value("throttle", DEV(d), 0);
  return OK;
}
/* The name before driver 535; the sampler uses it only when the new one is missing. */
int nvmlDeviceGetCurrentClocksThrottleReasons(void* d, unsigned long long* mask) {
  ENTER("nvmlDeviceGetCurrentClocksThrottleReasons");
  *mask = (unsigned long long)value("throttle", DEV(d), 0);
  return OK;
}
int nvmlDeviceGetTotalEccErrors(void* d, int error_type, int counter_type, unsigned long long* n) {
  ENTER("nvmlDeviceGetTotalEccErrors");
  if (counter_type != 0) return ERR_INVALID_ARGUMENT; /* NVML_VOLATILE_ECC */
  *n = (unsigned long long)value(error_type == 0 ? "ecc_corrected" : "ecc_uncorrected", DEV(d), 0);
  return OK;
}
int nvmlDeviceGetRemappedRows(void* d, unsigned* corr, unsigned* unc, unsigned* pending, unsigned* failure) {
  ENTER("nvmlDeviceGetRemappedRows");
  if (value("remap_unsupported", DEV(d), 0) != 0) return ERR_NOT_SUPPORTED;
  *corr = (unsigned)value("remap_corr", DEV(d), 0);
  *unc = (unsigned)value("remap_unc", DEV(d), 0);
  *pending = (unsigned)value("remap_pending", DEV(d), 0);
  *failure = (unsigned)value("remap_failure", DEV(d), 0);
  return OK;
}
int nvmlDeviceGetRetiredPages(void* d, int cause, unsigned* count, unsigned long long* addresses) {
  ENTER("nvmlDeviceGetRetiredPages");
  double sbe = -1, dbe = -1;
  sbe = value("retired_sbe", DEV(d), -1);
  dbe = value("retired_dbe", DEV(d), -1);
  if (sbe < 0 && dbe < 0) return ERR_NOT_SUPPORTED;
  if (cause != 0 && cause != 1) return ERR_INVALID_ARGUMENT;
  unsigned n = (unsigned)((cause == 0 ? sbe : dbe) < 0 ? 0 : (cause == 0 ? sbe : dbe));
  unsigned room = *count;
  *count = n;
  if (n > room) return ERR_INSUFFICIENT_SIZE;
  for (unsigned i = 0; addresses && i < n; ++i) addresses[i] = 0x1000ull * (i + 1);
  return OK;
}

/* The event API: one set; XIDs from the state file, each delivered once. */
typedef struct { void* device; unsigned long long type, data; unsigned gi, ci; } event_t_;
static int g_set_token;
static int g_registered[MAX_DEV];
static int g_delivered[MAX_DEV];
int nvmlEventSetCreate(void** set) {
  ENTER("nvmlEventSetCreate");
  *set = &g_set_token;
  return OK;
}
int nvmlDeviceRegisterEvents(void* d, unsigned long long types, void* set) {
  ENTER("nvmlDeviceRegisterEvents");
  if (set != &g_set_token) return ERR_INVALID_ARGUMENT;
  if (value("xid_unsupported", -1, 0) != 0) return ERR_NOT_SUPPORTED;
  if (types & 0x8) g_registered[DEV(d)] = 1, g_delivered[DEV(d)] = 0; /* nvmlEventTypeXidCriticalError */
  return OK;
}
int nvmlEventSetWait_v2(void* set, event_t_* e, unsigned timeout_ms) {
  ENTER("nvmlEventSetWait_v2");
  (void)timeout_ms; /* never waits: an event is either there or not */
  if (set != &g_set_token) return ERR_INVALID_ARGUMENT;
  for (int i = 0; i < ndev(); ++i) {
    char list[256];
    if (!g_registered[i] || !lookup_text("xid", i, list, sizeof list)) continue;
    int k = 0;
    for (char* tok = strtok(list, ", "); tok; tok = strtok(NULL, ", "), ++k) {
      if (k < g_delivered[i]) continue;
      g_delivered[i]++;
      g_devs[i].index = i;
      e->device = &g_devs[i];
      e->type = 0x8;
      e->data = strtoull(tok, NULL, 10);
      e->gi = e->ci = 0xFFFFFFFFu;
      return OK;
    }
  }
  return ERR_TIMEOUT;
}
int nvmlEventSetFree(void* set) {
  ENTER("nvmlEventSetFree");
  return set == &g_set_token ? OK : ERR_INVALID_ARGUMENT;
}
