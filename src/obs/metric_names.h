// Every metric fluxtrain exposes, declared once: name, type, help (which says the unit) and the
// variable labels. docs/formats.md ("Metrics") documents the same table, the Prometheus rules in
// deploy/prometheus/ and the Grafana dashboard use these names, and tests check all three agree.
//
//   obs::Gauge& loss = registry.gauge(obs::metric::kLoss);
//   for (const obs::MetricDef& d : obs::kAllMetrics) std::puts(d.name);
//
// Conventions (Prometheus): fluxtrain_ prefix, base units in the name (seconds, bytes, watts,
// hertz, celsius, ratio in [0, 1]), counters end in _total. Every series also carries the
// constant labels of its process: run, rank, dp, tp, pp (see Telemetry).
#pragma once

#include "obs/registry.h"

namespace ft::obs::metric {

using T = MetricType;

// Run and progress.
inline constexpr MetricDef kStartTime{"fluxtrain_start_time_seconds", T::kGauge,
                                      "Unix time at which this process started its run.", ""};
inline constexpr MetricDef kWorldSize{"fluxtrain_world_size", T::kGauge, "Number of ranks in the run.", ""};
inline constexpr MetricDef kStep{"fluxtrain_step", T::kGauge, "Last completed optimizer step.", ""};
inline constexpr MetricDef kStepsPlanned{"fluxtrain_steps_planned", T::kGauge,
                                         "Optimizer steps the run is configured for (train.steps).", ""};
inline constexpr MetricDef kSteps{"fluxtrain_steps_total", T::kCounter, "Optimizer steps completed by this process.",
                                  ""};
inline constexpr MetricDef kLastStepTime{"fluxtrain_last_step_timestamp_seconds", T::kGauge,
                                         "Unix time at which the last optimizer step completed.", ""};
inline constexpr MetricDef kStepDuration{"fluxtrain_step_duration_seconds", T::kHistogram,
                                         "Wall time of one optimizer step in seconds.", ""};
inline constexpr MetricDef kTokens{
    "fluxtrain_tokens_total", T::kCounter,
    "Tokens of the global batch trained by the job since this process started (the same on every "
    "rank: aggregate with max, not sum).",
    ""};
inline constexpr MetricDef kTokensPerSecond{"fluxtrain_tokens_per_second", T::kGauge,
                                            "Job-wide training throughput of the last step in tokens per second.", ""};
inline constexpr MetricDef kLoss{"fluxtrain_loss", T::kGauge,
                                 "Training cross-entropy of the last step in nats per token.", ""};
inline constexpr MetricDef kValLoss{"fluxtrain_validation_loss", T::kGauge,
                                    "Validation cross-entropy of the last evaluation in nats per token.", ""};
inline constexpr MetricDef kValBpc{"fluxtrain_validation_bpc", T::kGauge,
                                   "Validation bits per character of the last evaluation.", ""};
inline constexpr MetricDef kGradNorm{"fluxtrain_grad_norm", T::kGauge,
                                     "Global L2 norm of the gradients of the last step, before clipping.", ""};
inline constexpr MetricDef kLearningRate{"fluxtrain_learning_rate", T::kGauge, "Learning rate of the last step.", ""};
inline constexpr MetricDef kMfu{"fluxtrain_mfu_ratio", T::kGauge,
                                "Model FLOPs utilisation of the last step (achieved / peak FLOP/s, 0 to 1).", ""};
inline constexpr MetricDef kDataWait{"fluxtrain_data_wait_seconds_total", T::kCounter,
                                     "Seconds the step loop waited for the next batch.", ""};
inline constexpr MetricDef kDataFetched{
    "fluxtrain_data_fetched_bytes_total", T::kCounter,
    "Dataset shard bytes this rank fetched from object storage (data.path = s3:// or gs://).", ""};
inline constexpr MetricDef kValSourceLoss{
    "fluxtrain_validation_source_loss", T::kGauge,
    "Validation cross-entropy of one data source (a mixture's source or a language) at the last evaluation, "
    "in nats per token.",
    "source"};
inline constexpr MetricDef kValSourceBpc{"fluxtrain_validation_source_bpc", T::kGauge,
                                         "Validation bits per character of one data source at the last evaluation.",
                                         "source"};
inline constexpr MetricDef kLossScale{"fluxtrain_loss_scale", T::kGauge, "Dynamic loss scale (fp16 training only).",
                                      ""};
inline constexpr MetricDef kSkippedSteps{"fluxtrain_skipped_steps_total", T::kCounter,
                                         "Steps whose update was skipped (non-finite gradients or a loss spike).", ""};
inline constexpr MetricDef kRestarts{"fluxtrain_restarts_total", T::kCounter,
                                     "Times this run was resumed from a checkpoint.", ""};
inline constexpr MetricDef kGuardEvents{
    "fluxtrain_guard_events_total", T::kCounter,
    "Steps the training guards acted on, by reason: nan_loss, inf_loss, nan_grad_norm, inf_grad_norm, "
    "loss_spike, grad_norm_spike.",
    "reason"};
inline constexpr MetricDef kRollbacks{
    "fluxtrain_rollbacks_total", T::kCounter,
    "Rollbacks to the last checkpoint after repeated loss spikes (the data window that caused them is skipped).", ""};
inline constexpr MetricDef kGoodput{
    "fluxtrain_goodput_ratio", T::kGauge,
    "Productive training time over wall time since the job began, 0 to 1: fluxtrain_productive_seconds over "
    "it plus fluxtrain_badput_seconds_total of every kind.",
    ""};
inline constexpr MetricDef kBadput{
    "fluxtrain_badput_seconds_total", T::kCounter,
    "Seconds of the job's wall time that were not productive training, by kind: startup, restart, data_wait, "
    "checkpoint, evaluation, straggler, lost_work, skipped_update, other (since the job began, every attempt).",
    "kind"};
inline constexpr MetricDef kProductive{
    "fluxtrain_productive_seconds", T::kGauge,
    "Seconds of productive training since the job began: the steps that count, less their data waits and "
    "straggler waits (with fluxtrain_badput_seconds_total it sums to the job's wall time).",
    ""};
inline constexpr MetricDef kStragglerSlowdown{
    "fluxtrain_straggler_slowdown", T::kGauge,
    "Compute time per step of a rank named a straggler over the median of all ranks (exposed by rank 0 while "
    "the rank is a straggler).",
    "straggler_rank,straggler_host"};
inline constexpr MetricDef kStragglerSeconds{
    "fluxtrain_straggler_seconds_total", T::kCounter,
    "Seconds the job waited for stragglers: per step, the slowest straggler's compute time minus the slowest "
    "healthy rank's (rank 0).",
    ""};
// Sniff tests (obs/sniff.h): rank 0 exposes every rank's latest times and the ranks named slow.
inline constexpr MetricDef kSniffGemm{
    "fluxtrain_sniff_gemm_seconds", T::kGauge,
    "Seconds of the sniff test's fixed GEMM on each rank, its latest run (rank 0 exposes every rank's).",
    "sniff_rank,sniff_host,sniff_dp,sniff_tp,sniff_pp"};
inline constexpr MetricDef kSniffLink{
    "fluxtrain_sniff_link_seconds", T::kGauge,
    "Seconds of the sniff test's fastest round trip of a rank with a neighbour on a mesh axis, its latest run "
    "(rank 0 exposes every rank's).",
    "axis,sniff_rank,sniff_host,sniff_dp,sniff_tp,sniff_pp"};
inline constexpr MetricDef kSniffAllReduce{
    "fluxtrain_sniff_all_reduce_seconds", T::kGauge,
    "Seconds of the sniff test's fixed all-reduce over a mesh axis as each rank saw it, its latest run (rank 0 "
    "exposes every rank's).",
    "axis,sniff_rank,sniff_host,sniff_dp,sniff_tp,sniff_pp"};
inline constexpr MetricDef kSniffSlow{
    "fluxtrain_sniff_slow", T::kGauge,
    "A rank the latest sniff test named slow: its time over the median of its peers' (check gemm or link_<axis>; "
    "exposed by rank 0 while the rank is named).",
    "check,sniff_rank,sniff_host,sniff_dp,sniff_tp,sniff_pp"};
inline constexpr MetricDef kRecovery{
    "fluxtrain_recovery_seconds", T::kGauge,
    "Seconds from the supervisor detecting the last failure to the first training step after the restart.", ""};

// Communication, per collective.
inline constexpr MetricDef kCommBytes{"fluxtrain_comm_bytes_total", T::kCounter,
                                      "Bytes this rank sent in collectives and point-to-point transfers.", "op"};
inline constexpr MetricDef kCommSeconds{"fluxtrain_comm_seconds_total", T::kCounter,
                                        "Seconds this rank spent in collectives and point-to-point transfers.", "op"};
inline constexpr MetricDef kCommOps{"fluxtrain_comm_operations_total", T::kCounter,
                                    "Collective and point-to-point operations issued by this rank.", "op"};
// Context parallelism (parallel.cp > 1), per step from the cp communicator and the ring's clock.
inline constexpr MetricDef kCpBytes{
    "fluxtrain_cp_bytes_total", T::kCounter,
    "Bytes this rank sent on its context-parallel group: the ring's key/value and dK/dV blocks or the all-to-all's "
    "exchanges, and the step's sums (metrics.jsonl per_rank.cp_bytes, summed over the steps).",
    ""};
inline constexpr MetricDef kCpRingHidden{
    "fluxtrain_cp_ring_hidden_ratio", T::kGauge,
    "Share of the ring attention's overlapped key/value transfer time hidden behind block compute since the run "
    "started, 0 to 1 (parallel.cp_attention = \"ring\"; metrics.jsonl per_rank.cp_ring_hidden_ratio).",
    ""};

// Checkpoints.
inline constexpr MetricDef kCkptDuration{"fluxtrain_checkpoint_duration_seconds", T::kHistogram,
                                         "Seconds from the start of a checkpoint to its durable commit.", ""};
inline constexpr MetricDef kCkptLastSuccess{"fluxtrain_checkpoint_last_success_timestamp_seconds", T::kGauge,
                                            "Unix time of the last checkpoint committed successfully.", ""};
inline constexpr MetricDef kCkptStep{"fluxtrain_checkpoint_step", T::kGauge,
                                     "Step of the last checkpoint committed successfully.", ""};
inline constexpr MetricDef kCkptInterval{
    "fluxtrain_checkpoint_interval_seconds", T::kGauge,
    "Expected seconds between checkpoints (checkpoint interval in steps times the mean step time).", ""};
inline constexpr MetricDef kCkptFailures{"fluxtrain_checkpoint_failures_total", T::kCounter, "Checkpoints that failed.",
                                         ""};
inline constexpr MetricDef kCkptUploadBytes{"fluxtrain_checkpoint_upload_bytes_total", T::kCounter,
                                            "Bytes of this rank's checkpoint files uploaded to an object store.", ""};
inline constexpr MetricDef kCkptUploadSeconds{"fluxtrain_checkpoint_upload_seconds_total", T::kCounter,
                                              "Seconds this rank spent uploading checkpoint files (background).", ""};
inline constexpr MetricDef kCkptSkipped{
    "fluxtrain_checkpoint_skipped_total", T::kCounter,
    "Checkpoint saves skipped because two earlier ones were still uploading (ckpt.when_busy = \"skip\").", ""};

// Memory (process-wide accounting of tensor/memory.h).
inline constexpr MetricDef kMemory{"fluxtrain_memory_bytes", T::kGauge,
                                   "Live bytes of tracked allocations by category (category=\"total\" is their sum).",
                                   "category"};
inline constexpr MetricDef kMemoryPeak{"fluxtrain_memory_peak_bytes", T::kGauge,
                                       "Peak live bytes of tracked allocations by category.", "category"};
// The same for each accelerator whose backend is built in (not the CPU: the two above).
inline constexpr MetricDef kDeviceMemory{"fluxtrain_device_memory_bytes", T::kGauge,
                                         "Live bytes of tracked allocations on an accelerator by category "
                                         "(category=\"total\" is their sum).",
                                         "device,category"};
inline constexpr MetricDef kDeviceMemoryPeak{"fluxtrain_device_memory_peak_bytes", T::kGauge,
                                             "Peak live bytes of tracked allocations on an accelerator by category.",
                                             "device,category"};
inline constexpr MetricDef kRss{"fluxtrain_process_resident_memory_bytes", T::kGauge,
                                "Resident set size of the process in bytes.", ""};
inline constexpr MetricDef kPeakRss{"fluxtrain_process_peak_resident_memory_bytes", T::kGauge,
                                    "Peak resident set size of the process in bytes.", ""};

// GPU health (NVML), per GPU this rank uses.
inline constexpr MetricDef kGpuInfo{"fluxtrain_gpu_info", T::kGauge,
                                    "Always 1; labels name the GPU (NVML index, UUID, product name).", "gpu,uuid,name"};
inline constexpr MetricDef kGpuTemp{"fluxtrain_gpu_temperature_celsius", T::kGauge,
                                    "GPU die temperature in degrees Celsius.", "gpu"};
inline constexpr MetricDef kGpuPower{"fluxtrain_gpu_power_watts", T::kGauge, "GPU board power draw in watts.", "gpu"};
inline constexpr MetricDef kGpuUtil{"fluxtrain_gpu_utilization_ratio", T::kGauge,
                                    "Fraction of the last sample period during which a kernel ran on the GPU (0 to 1).",
                                    "gpu"};
inline constexpr MetricDef kGpuMemUsed{"fluxtrain_gpu_memory_used_bytes", T::kGauge,
                                       "GPU memory in use, all processes, in bytes.", "gpu"};
inline constexpr MetricDef kGpuMemTotal{"fluxtrain_gpu_memory_total_bytes", T::kGauge,
                                        "GPU memory installed, in bytes.", "gpu"};
inline constexpr MetricDef kGpuSmClock{"fluxtrain_gpu_sm_clock_hertz", T::kGauge, "GPU SM clock in hertz.", "gpu"};
inline constexpr MetricDef kGpuThrottle{"fluxtrain_gpu_throttle_active", T::kGauge,
                                        "1 when the GPU clocks are held back for this reason, else 0.", "gpu,reason"};
inline constexpr MetricDef kGpuEcc{"fluxtrain_gpu_ecc_errors_total", T::kCounter,
                                   "ECC memory errors since the driver loaded (volatile counters).", "gpu,type"};
inline constexpr MetricDef kGpuXidEvents{"fluxtrain_gpu_xid_events_total", T::kCounter,
                                         "XID errors the driver reported for the GPU (NVML's event API) since the "
                                         "rank started.",
                                         "gpu"};
inline constexpr MetricDef kGpuLastXid{"fluxtrain_gpu_last_xid", T::kGauge,
                                       "The last XID error the GPU reported (0 = none since the rank started).", "gpu"};
inline constexpr MetricDef kGpuRemappedRows{"fluxtrain_gpu_remapped_rows", T::kGauge,
                                            "Memory rows the GPU has remapped (for correctable or uncorrectable "
                                            "errors), over its life.",
                                            "gpu,cause"};
inline constexpr MetricDef kGpuRemapPending{"fluxtrain_gpu_row_remap_pending", T::kGauge,
                                            "1 while a row remap waits for a GPU reset to take effect, else 0.", "gpu"};
inline constexpr MetricDef kGpuRemapFailure{"fluxtrain_gpu_row_remap_failure", T::kGauge,
                                            "1 when a row remap has failed (the GPU needs service), else 0.", "gpu"};
inline constexpr MetricDef kGpuRetiredPages{"fluxtrain_gpu_retired_pages", T::kGauge,
                                            "Memory pages the GPU has retired, by cause (GPUs before Ampere).",
                                            "gpu,cause"};
inline constexpr MetricDef kGpuFault{"fluxtrain_gpu_fault", T::kGauge,
                                     "1 once the GPU reported an uncorrectable ECC error, a fatal XID or a failed "
                                     "row remap: the rank stops and its host is excluded from the restart.",
                                     "gpu"};
inline constexpr MetricDef kGpuTempAlert{"fluxtrain_gpu_temperature_alert", T::kGauge,
                                         "1 while the GPU is above metrics.gpu_temp_alert_c, else 0.", "gpu"};
inline constexpr MetricDef kGpuTempThreshold{
    "fluxtrain_gpu_temperature_alert_threshold_celsius", T::kGauge,
    "The in-process GPU temperature alarm threshold (metrics.gpu_temp_alert_c).", ""};

}  // namespace ft::obs::metric

namespace ft::obs {

inline constexpr const MetricDef* kAllMetrics[] = {
    &metric::kStartTime,
    &metric::kWorldSize,
    &metric::kStep,
    &metric::kStepsPlanned,
    &metric::kSteps,
    &metric::kLastStepTime,
    &metric::kStepDuration,
    &metric::kTokens,
    &metric::kTokensPerSecond,
    &metric::kLoss,
    &metric::kValLoss,
    &metric::kValBpc,
    &metric::kGradNorm,
    &metric::kLearningRate,
    &metric::kMfu,
    &metric::kDataWait,
    &metric::kDataFetched,
    &metric::kValSourceLoss,
    &metric::kValSourceBpc,
    &metric::kLossScale,
    &metric::kSkippedSteps,
    &metric::kRestarts,
    &metric::kGuardEvents,
    &metric::kRollbacks,
    &metric::kRecovery,
    &metric::kGoodput,
    &metric::kBadput,
    &metric::kProductive,
    &metric::kStragglerSlowdown,
    &metric::kStragglerSeconds,
    &metric::kSniffGemm,
    &metric::kSniffLink,
    &metric::kSniffAllReduce,
    &metric::kSniffSlow,
    &metric::kCommBytes,
    &metric::kCommSeconds,
    &metric::kCommOps,
    &metric::kCpBytes,
    &metric::kCpRingHidden,
    &metric::kCkptDuration,
    &metric::kCkptLastSuccess,
    &metric::kCkptStep,
    &metric::kCkptInterval,
    &metric::kCkptFailures,
    &metric::kCkptUploadBytes,
    &metric::kCkptUploadSeconds,
    &metric::kCkptSkipped,
    &metric::kMemory,
    &metric::kMemoryPeak,
    &metric::kDeviceMemory,
    &metric::kDeviceMemoryPeak,
    &metric::kRss,
    &metric::kPeakRss,
    &metric::kGpuInfo,
    &metric::kGpuTemp,
    &metric::kGpuPower,
    &metric::kGpuUtil,
    &metric::kGpuMemUsed,
    &metric::kGpuMemTotal,
    &metric::kGpuSmClock,
    &metric::kGpuThrottle,
    &metric::kGpuEcc,
    &metric::kGpuXidEvents,
    &metric::kGpuLastXid,
    &metric::kGpuRemappedRows,
    &metric::kGpuRemapPending,
    &metric::kGpuRemapFailure,
    &metric::kGpuRetiredPages,
    &metric::kGpuFault,
    &metric::kGpuTempAlert,
    &metric::kGpuTempThreshold,
};

}  // namespace ft::obs
