// Published-run records as planner jobs: model shapes that reproduce the stated parameter
// counts, the catalog lookups of free-form GPU names, the interconnect parser, the TFLOP/s
// conventions, GPU overrides from TOML.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "plan/research/record.h"
#include "plan/traffic.h"
#include "util/error.h"
#include "util/fs.h"

namespace ft::plan {
namespace {

nlohmann::json runs() {
  return nlohmann::json::parse(read_file(std::string(FT_SOURCE_DIR) + "/configs/planner/published-runs-dev.json"));
}

nlohmann::json find(const std::string& id) {
  for (auto& r : runs())
    if (r["id"] == id) return r;
  ADD_FAILURE() << "no record " << id;
  return {};
}

// Every record with a shape and a parameter count: the planner's model has that many
// parameters (within 3%: records round, biases are not modelled). Counts that include a learned
// position table (llm-foundry's rows say so in their notes; it does no matrix multiplies and
// the planner leaves it out) are skipped.
TEST(PlanRecord, ShapesReproduceParameterCounts) {
  int checked = 0;
  for (const auto& r : runs()) {
    if (!r.contains("params_b") || r["params_b"].is_null()) continue;
    if (r.value("notes", std::string()).find("pos-emb") != std::string::npos) continue;
    RecordJob rj;
    try {
      rj = job_from_record(r);
    } catch (const Error&) {
      continue;  // not enough information (checked below)
    }
    const double want = r["params_b"].get<double>() * 1e9;
    EXPECT_NEAR(rj.job.model.num_params() / want, 1.0, 0.03) << r["id"];
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

TEST(PlanRecord, NotEnoughInformationNamesTheFields) {
  try {
    job_from_record(find("glm-130b"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing layers, hidden, vocab, seq_len"), std::string::npos) << e.what();
  }
  try {
    job_from_record(find("palm-540b"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'TPU v4' is not in the catalog"), std::string::npos) << e.what();
  }
}

// The run's attention kernel and pipeline schedule as its record states them: "unfused" prices
// the materialised softmax (no flash attention), "interleaved" without vp leaves the depth to the
// search; anything else is refused, naming the record, field and value.
TEST(PlanRecord, AttentionKernelAndPipelineSchedule) {
  EXPECT_FALSE(job_from_record(find("megatron21-t1-1.7b")).fixed.flash_attention);
  EXPECT_TRUE(job_from_record(find("pythia-160m")).fixed.flash_attention);  // its config names flash
  EXPECT_FALSE(job_from_record(find("llama3-405b-t4-16384gpu-seq8192")).fixed.vp.has_value());
  EXPECT_EQ(job_from_record(find("megatron21-t2-ptd-p-174.6b-768gpu")).fixed.vp, 1);
  nlohmann::json r = find("megatron21-t1-1.7b");
  r["attention"] = "sparse";
  try {
    job_from_record(r);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("megatron21-t1-1.7b: attention = 'sparse'"), std::string::npos) << e.what();
  }
  r = find("llama3-405b-t4-16384gpu-seq8192");
  r["pipeline_schedule"] = "zero-bubble";
  try {
    job_from_record(r);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline_schedule = 'zero-bubble'"), std::string::npos) << e.what();
  }
}

// What the Pythia configs state beyond the layout: "synchronize-each-layer" (a device-wide
// synchronize at every checkpointed layer, so the data-parallel collectives overlap nothing) and no
// sequence parallelism; MPT-7B's figure is wall clock, so it pays its four stated interruptions.
// Bad values are refused naming the record, field and value.
TEST(PlanRecord, SynchronizeEachLayerAndWallClockFigures) {
  const nlohmann::json pythia = find("pythia-12b");
  const RecordJob rj = job_from_record(pythia);
  EXPECT_TRUE(rj.fixed.sync_each_layer);
  EXPECT_EQ(rj.fixed.sequence_parallel, false);
  const RecordPrediction synced = predict(rj);
  EXPECT_GT(synced.plan.time.dp_comm, 0);
  EXPECT_DOUBLE_EQ(synced.plan.time.dp_exposed, synced.plan.time.dp_comm);
  EXPECT_FALSE(synced.plan.layout.sequence_parallel);
  nlohmann::json overlapped = pythia;
  overlapped.erase("synchronize_each_layer");
  const RecordPrediction free = predict(job_from_record(overlapped));
  EXPECT_LT(free.plan.time.dp_exposed, 0.9 * free.plan.time.dp_comm);
  EXPECT_LT(synced.plan.tokens_per_s_per_gpu, free.plan.tokens_per_s_per_gpu);

  const nlohmann::json mpt = find("mpt-7b");
  const RecordJob wall = job_from_record(mpt);
  EXPECT_TRUE(wall.wall_clock_figure);
  EXPECT_NEAR(wall.job.resilience.failures_per_gpu_day, 4.0 / (9.5 * 440), 1e-12);
  const RecordPrediction p = predict(wall);
  ASSERT_GT(p.plan.wall_seconds_with_failures, p.plan.wall_seconds);
  EXPECT_NEAR(predicted_figure(mpt, wall, p, "tokens_per_s_per_gpu"),
              p.plan.tokens_per_s_per_gpu * p.plan.wall_seconds / p.plan.wall_seconds_with_failures, 1e-9);

  auto refused = [](nlohmann::json r, const char* key, nlohmann::json value, const std::string& want) {
    r[key] = std::move(value);
    try {
      job_from_record(r);
      ADD_FAILURE() << key << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refused(pythia, "synchronize_each_layer", "yes", "pythia-12b: field 'synchronize_each_layer' = \"yes\"");
  refused(pythia, "sequence_parallel", 0, "pythia-12b: field 'sequence_parallel' = 0");
  refused(mpt, "throughput_basis", "billing", "mpt-7b: throughput_basis = 'billing'");
  nlohmann::json no_days = mpt;
  no_days.erase("wall_days");
  refused(no_days, "interruptions", 4, "mpt-7b: interruptions = 4 needs a positive wall_days");
}

// What the H100 records state about their kernels and schedules (issue 32, plan-h100): "cudnn"
// attention is Hopper's fused kernel, priced at attention_hopper (the attention term shrinks by
// attention / attention_hopper, all else equal); AsyncTP hides the TP collectives behind the
// GEMMs; torchtitan's "selective op" recomputes wk, wo and w3, (1024 + 4096 + 14336) / 53248 of
// Llama 3 8B's block matmuls (h 4096, kv 1024, ffn 14336) by hand.
TEST(PlanRecord, HopperAttentionAsyncTpAndSelectiveOp) {
  const nlohmann::json nemo = find("nemo2403-h100-fp8-llama2-7b-seq64k");
  RecordJob cudnn = job_from_record(nemo);
  EXPECT_TRUE(cudnn.job.hopper_attention);
  EXPECT_TRUE(cudnn.fixed.flash_attention);
  nlohmann::json fa2 = nemo;
  fa2["attention"] = "flash";
  RecordJob flash = job_from_record(fa2);
  EXPECT_FALSE(flash.job.hopper_attention);
  const RecordPrediction a = predict(cudnn), b = predict(flash);
  ASSERT_EQ(a.plan.layout.describe(), b.plan.layout.describe());
  const Efficiency& e = cudnn.job.gpu.eff;
  EXPECT_NEAR(a.plan.time.attention / b.plan.time.attention, e.attention / e.attention_hopper, 1e-9);
  EXPECT_NEAR(a.plan.time.gemm, b.plan.time.gemm, 1e-12);
  // An A100 runs a Hopper kernel at its one attention efficiency.
  EXPECT_EQ(find_gpu("a100-80gb").eff.attention_hopper, find_gpu("a100-80gb").eff.attention);

  const nlohmann::json tt = find("torchtitan-h100-t4-70b-11");
  RecordJob async = job_from_record(tt);
  EXPECT_TRUE(async.job.async_tp);
  nlohmann::json sync_rec = tt;
  sync_rec.erase("async_tp");
  RecordJob sync = job_from_record(sync_rec);
  EXPECT_FALSE(sync.job.async_tp);
  const RecordPrediction pa = predict(async), ps = predict(sync);
  EXPECT_LT(pa.plan.time.tp_comm, ps.plan.time.tp_comm);  // partly hidden behind the GEMMs
  EXPECT_LT(pa.plan.time.total, ps.plan.time.total);
  sync_rec["async_tp"] = "yes";
  try {
    job_from_record(sync_rec);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("torchtitan-h100-t4-70b-11: field 'async_tp' = \"yes\""), std::string::npos)
        << e.what();
  }

  RecordJob op = job_from_record(find("torchtitan-h100-t1-8b-0"));
  EXPECT_NEAR(op.job.recompute_matmul_share, (1024.0 + 4096 + 14336) / 53248, 1e-12);
  EXPECT_EQ(op.fixed.recompute, ActRecompute::kNone);
  EXPECT_EQ(job_from_record(find("nemo2403-h100-fp8-llama2-7b-seq4k")).job.recompute_matmul_share, 0);
}

// torchtitan's "selective layer" checkpoints every second block whole (its default
// selective_ac_option "2"): the GEMMs and attention are the mean of none's and full's on the same
// layout, and the memory lies between them.
TEST(PlanRecord, SelectiveLayerIsHalfTheBlocksRecomputed) {
  const nlohmann::json rec = find("torchtitan-a100-llama-2-13b-4");
  const RecordJob layer = job_from_record(rec);
  EXPECT_EQ(layer.job.recompute_layer_share, 0.5);
  EXPECT_EQ(layer.fixed.recompute, ActRecompute::kNone);
  nlohmann::json full_rec = rec, none_rec = rec;
  full_rec["activation_recompute"] = "full";
  none_rec["activation_recompute"] = "none";
  const RecordPrediction l = predict(layer), f = predict(job_from_record(full_rec)),
                         n = predict(job_from_record(none_rec));
  ASSERT_EQ(l.plan.layout.describe(), n.plan.layout.describe());
  ASSERT_EQ(f.plan.layout.tp, n.plan.layout.tp);
  ASSERT_EQ(f.plan.layout.micro_batch, n.plan.layout.micro_batch);
  EXPECT_NEAR(l.plan.time.gemm, (n.plan.time.gemm + f.plan.time.gemm) / 2, 1e-9 * l.plan.time.gemm);
  EXPECT_NEAR(l.plan.time.attention, (n.plan.time.attention + f.plan.time.attention) / 2, 1e-9 * l.plan.time.attention);
  EXPECT_GT(l.plan.time.total, n.plan.time.total);
  EXPECT_LT(l.plan.time.total, f.plan.time.total);
  EXPECT_LT(l.plan.memory.activations, n.plan.memory.activations);
  EXPECT_GT(l.plan.memory.activations, f.plan.memory.activations);
}

// Runs before sequence parallelism (Korthikanti et al. 2022) say so: their tp ranks each run the
// norms, dropouts and residuals of every token. Megatron-LM's scatter/gather (Narayanan et al. 2021,
// Sec. 4.1) sends a tp rank's 1/tp of a pipeline message without it; other runs send it whole.
TEST(PlanRecord, SequenceParallelAndPipelineScatterGather) {
  const RecordJob nlg = job_from_record(find("mt-nlg-530b-2240gpu"));
  EXPECT_EQ(nlg.fixed.sequence_parallel, false);
  EXPECT_FALSE(nlg.fixed.pp_scatter_gather);
  EXPECT_FALSE(predict(nlg).plan.layout.sequence_parallel);
  EXPECT_FALSE(job_from_record(find("llama3-405b-t4-16384gpu-seq8192")).fixed.sequence_parallel.has_value());

  const RecordJob rj = job_from_record(find("megatron21-t1-529.6b"));
  ASSERT_TRUE(rj.fixed.pp_scatter_gather);
  const RecordPrediction p = predict(rj);
  Layout whole = p.plan.layout;
  ASSERT_FALSE(whole.sequence_parallel);
  ASSERT_EQ(whole.tp, 8);
  whole.pp_scatter_gather = false;
  const double split = rank_traffic(p.job, p.plan.layout).pp_message, full = rank_traffic(p.job, whole).pp_message;
  EXPECT_DOUBLE_EQ(full, 2048.0 * 20480 * 2);  // one sequence of the residual stream in fp16
  EXPECT_DOUBLE_EQ(split, full / 8);

  for (const char* key : {"sequence_parallel", "pipeline_scatter_gather"}) {
    nlohmann::json r = find("megatron21-t1-529.6b");
    r[key] = "no";
    try {
      job_from_record(r);
      FAIL() << key;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("megatron21-t1-529.6b: field '") + key +
                                           "' = \"no\" is not true or false"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(PlanRecord, GpuNamesAndInterconnects) {
  EXPECT_EQ(gpu_name_from_description("A100-SXM4-40GB (AWS p4d.24xlarge)"), "a100-40gb");
  EXPECT_EQ(gpu_name_from_description("A100-SXM4-80GB"), "a100-80gb");
  EXPECT_EQ(gpu_name_from_description("H100-SXM5-80GB (DGX-H100)"), "h100-sxm");
  EXPECT_EQ(gpu_name_from_description("H100 (96GB HBM2e variant, 500W cap)"), "h100-96gb");
  EXPECT_EQ(gpu_name_from_description("B200 (DGX B200)"), "b200");
  EXPECT_EQ(gpu_name_from_description("B200 in GB200 NVL72"), "gb200");
  EXPECT_EQ(gpu_name_from_description("TPU v4"), "");
  // DGX A100: 8 x HDR 200 Gb/s per node = 25 GB/s per GPU; per-GPU NICs stay per GPU.
  EXPECT_DOUBLE_EQ(network_bw_from_text("8x HDR InfiniBand 200 Gb/s HCAs per node, fat tree", 8), 25e9);
  EXPECT_DOUBLE_EQ(network_bw_from_text("1600 Gb/s node-to-node RoCE", 8), 25e9);
  EXPECT_DOUBLE_EQ(network_bw_from_text("RoCE 400 Gb/s per GPU, 3-layer Clos", 8), 50e9);
  EXPECT_DOUBLE_EQ(network_bw_from_text("4x Omni-Path 100 Gb/s links per node", 8), 6.25e9);
  EXPECT_DOUBLE_EQ(network_bw_from_text("NVLink 900 GB/s", 8), 0.0);
}

// The TFLOP/s a record publishes is converted with its own convention: Megatron 2021 eq. 3
// counts the recompute forward pass.
TEST(PlanRecord, TflopsInTheRecordsConvention) {
  nlohmann::json r = find("megatron21-t1-145.6b");
  nlohmann::json p = predict_record(r);
  const double tps = p["tokens_per_s_per_gpu"].get<double>();
  const double s = 2048, l = 80, h = 12288, V = 51200;
  const double eq3 = 96 * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)) / s;  // per token
  EXPECT_NEAR(p["tflops_per_gpu"].get<double>(), tps * eq3 / 1e12, 1e-6);
  EXPECT_EQ(p["comparison"]["metric"], "tokens_per_s_per_gpu");
  // Model-FLOPs records: tflops = tokens/s x (6N + 12·L·h·s).
  nlohmann::json q = predict_record(find("nemo2403-h100-fp8-llama2-7b-seq4k"));
  EXPECT_NEAR(q["tflops_per_gpu"].get<double>(), q["model_tflops_per_gpu"].get<double>(), 1e-9);
}

TEST(PlanRecord, PredictionHasTheRequiredFields) {
  nlohmann::json p = predict_record(find("bloom-176b-run"));
  for (const char* k : {"tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "step_time_s", "memory_per_gpu_gb"})
    ASSERT_TRUE(p.contains(k) && p[k].is_number()) << k;
  EXPECT_EQ(p["layout"]["tp"], 4);
  EXPECT_EQ(p["layout"]["pp"], 12);
  EXPECT_EQ(p["layout"]["dp"], 8);
  EXPECT_EQ(p["layout"]["micro_batch"], 2);
  EXPECT_EQ(p["layout"]["recompute"], "full");
}

TEST(PlanRecord, GpuOverridesFromToml) {
  auto path = std::filesystem::temp_directory_path() / ("ft_gpu_" + std::to_string(::getpid()) + ".toml");
  std::ofstream(path) << "[gpu]\nbase = \"h100-sxm\"\nname = \"h100-lab\"\nmemory_gib = 94\nnetwork_gbs = 12.5\n"
                         "[gpu.efficiency]\ngemm = 0.5\n";
  GpuSpec g = find_gpu("a100-80gb");
  apply_gpu_overrides(g, path.string());
  EXPECT_EQ(g.name, "h100-lab");
  EXPECT_DOUBLE_EQ(g.peak_bf16, 989.4e12);
  EXPECT_DOUBLE_EQ(g.memory_bytes, 94 * 1073741824.0);
  EXPECT_DOUBLE_EQ(g.network_bw, 12.5e9);
  EXPECT_DOUBLE_EQ(g.eff.gemm, 0.5);
  std::ofstream(path) << "[gpu]\nmemory_gb = 94\n";
  try {
    apply_gpu_overrides(g, path.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown config key 'gpu.memory_gb'"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("gpu.memory_gib"), std::string::npos) << e.hint();
  }
  std::ofstream(path) << "[gpu.efficiency]\ngemm = 1.5\n";
  EXPECT_THROW(apply_gpu_overrides(g, path.string()), Error);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ft::plan
