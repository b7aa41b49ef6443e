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
 * fake_nvml_calls("nvmlDeviceGetPowerUsage") counts the calls made (tests check no retries). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEV 16
#define OK 0
#define ERR_INVALID_ARGUMENT 2
#define ERR_DRIVER_NOT_LOADED 9
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

/* Looks `key` up in the state file; returns 1 and sets *out when present. */
static int lookup(const char* key, double* out) {
  const char* path = getenv("FAKE_NVML_STATE");
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
  const char* path = getenv("FAKE_NVML_STATE");
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
