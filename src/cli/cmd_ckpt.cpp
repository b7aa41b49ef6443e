// fluxtrain ckpt — look into, check, convert checkpoints:
//   fluxtrain ckpt inspect CKPT [--json]            the manifest: step, layout, files, tensors
//   fluxtrain ckpt verify CKPT                      every chunk's tag and every piece's checksum
//   fluxtrain ckpt reshard CKPT OUT --dp 4 --zero 3 the same state under another layout
//   fluxtrain ckpt export-hf CKPT OUT               a Hugging Face LlamaForCausalLM directory
//   fluxtrain ckpt import-hf HF_DIR OUT             a Hugging Face LLaMA as a step-0 checkpoint
//   fluxtrain ckpt ls ROOT                          the steps under a root, committed or not
// CKPT is a step_<N> directory, a checkpoint root or a run directory (newest committed step); for
// ls, inspect, verify and export-hf also s3://bucket/prefix[/step_<N>] (--s3-endpoint, or the AWS
// variables) and gs://bucket/prefix[/step_<N>] (--gcs-endpoint, or STORAGE_EMULATOR_HOST / Google's),
// downloaded into a temporary directory first.
// Encrypted checkpoints need the key: --key-file FILE or FLUXTRAIN_CKPT_KEY.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ckpt/checkpointer.h"
#include "ckpt/ckpt_storage.h"
#include "ckpt/hf.h"
#include "ckpt/offline.h"
#include "ckpt/state_io.h"
#include "cli/command.h"
#include "config/config.h"
#include "data/objstore/object_store.h"
#include "util/config_binder.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/output_path.h"

namespace {

using ft::CkptKey;

CkptKey key_if_any(const std::string& key_file) {
  if (!key_file.empty() || ft::has_key_env()) return CkptKey::load(key_file);
  return CkptKey();
}

const CkptKey* ptr(const CkptKey& k) {
  return k.empty() ? nullptr : &k;
}

std::string human_bytes(double b) {
  const char* u[] = {"B", "KB", "MB", "GB", "TB"};
  int i = 0;
  while (b >= 1000 && i < 4) b /= 1000, ++i;
  return fmt::format("{:.1f} {}", b, u[i]);
}

// The config as TOML ([section] key = value), so `fluxtrain train --config OUT/train.toml` fits.
std::string config_toml(ft::Config c) {
  nlohmann::json j = c.to_json();
  std::string out = "# Written by fluxtrain ckpt import-hf: the imported model's config.\n";
  for (auto& [section, keys] : j.items()) {
    out += "\n[" + section + "]\n";
    for (auto& [k, v] : keys.items()) out += k + " = " + v.dump() + "\n";
  }
  return out;
}

// An s3:// checkpoint is read from a temporary local copy, removed when this goes.
struct Localized {
  std::string dir, work;
  Localized(const std::string& path, const std::string& endpoint) {
    if (!ft::ObjectUrl::is_object_url(path)) {
      dir = path;
      return;
    }
    char tmpl[] = "/tmp/fluxtrain-ckpt-XXXXXX";
    if (!::mkdtemp(tmpl)) throw ft::Error("cannot create a temporary directory under /tmp");
    work = tmpl;
    dir = ft::fetch_checkpoint(path, work, endpoint);
  }
  ~Localized() {
    std::error_code ec;
    if (!work.empty()) std::filesystem::remove_all(work, ec);
  }
};

int list_steps(const std::string& root, const std::string& endpoint) {
  char tmpl[] = "/tmp/fluxtrain-ckpt-XXXXXX";
  if (!::mkdtemp(tmpl)) throw ft::Error("cannot create a temporary directory under /tmp");
  std::unique_ptr<ft::CheckpointStorage> st = ft::open_checkpoint_storage(root, tmpl, 0, endpoint);
  std::vector<ft::StoredStep> steps = st->list_steps();
  std::filesystem::remove_all(tmpl);
  for (const ft::StoredStep& s : steps)
    fmt::print("{}  {:<10}  {}\n", ft::step_dir_name(s.step), s.committed ? "committed" : "incomplete", s.where);
  fmt::print("ls: {} step(s) under {}\n", steps.size(), root);
  return 0;
}

int inspect(const std::string& path, const std::string& key_file, bool as_json) {
  std::string dir = ft::resolve_checkpoint(path);
  CkptKey key = key_if_any(key_file);
  ft::CheckpointManifest m = ft::CheckpointManifest::load(dir, ptr(key));
  if (as_json) {
    fmt::print("{}", m.to_json_text(m.encrypted ? ptr(key) : nullptr));
    return 0;
  }
  uint64_t bytes = 0;
  int64_t params = 0, pieces = 0;
  for (const auto& f : m.files) bytes += f.file_bytes;
  for (const auto& t : m.tensors) params += ft::shape_numel(t.shape), pieces += static_cast<int64_t>(t.pieces.size());
  fmt::print("checkpoint  {}\n", dir);
  fmt::print("step        {} ({} tokens, {} optimizer steps), saved {} ({}), restarts {}\n", m.step, m.tokens,
             m.optimizer_steps, m.created, m.origin, m.restarts);
  fmt::print("layout      {}\n", m.layout_text());
  fmt::print("encryption  {}\n",
             m.encrypted ? fmt::format("AES-256-GCM, key id {}, {} chunks{}", m.key_id, human_bytes(m.chunk_bytes),
                                       key.empty() ? " (manifest not authenticated: no key given)"
                                                   : " (manifest HMAC verified)")
                         : "none (manifest checksum verified)");
  fmt::print("data        loader {}, tokenizer xxh3 {}\n",
             m.has_loader ? fmt::format("next sample {}, epoch {}", m.loader.next_sample, m.loader.epoch) : "none",
             m.tokenizer_hash ? fmt::format("{:016x}", m.tokenizer_hash) : "none");
  if (m.config.contains("model")) {
    const auto& mc = m.config["model"];
    fmt::print("model       dim {}, {} layers, {} heads ({} kv), ffn {}, vocab {}, tied {}\n", mc.value("dim", 0),
               mc.value("n_layers", 0), mc.value("n_heads", 0), mc.value("n_kv_heads", 0), mc.value("ffn_dim", 0),
               mc.value("vocab_size", 0), mc.value("tie_embeddings", false));
  }
  fmt::print("state       {} tensors, {} parameters (+ AdamW moments), {} pieces in {} file(s), {}\n", m.tensors.size(),
             params, pieces, m.files.size(), human_bytes(static_cast<double>(bytes)));
  for (const auto& f : m.files)
    fmt::print("  {}  rank {}  {}\n", f.name, f.rank, human_bytes(static_cast<double>(f.file_bytes)));
  for (const auto& t : m.tensors)
    fmt::print("  {:<48} {:<14} {} piece(s)\n", t.name, ft::shape_str(t.shape), t.pieces.size());
  return 0;
}

int verify(const std::string& path, const std::string& key_file, const std::string& endpoint) {
  std::unique_ptr<Localized> local;
  try {
    local = std::make_unique<Localized>(path, endpoint);
  } catch (const ft::FetchDamage& e) {  // an object missing or of the wrong size: damage, exit 1
    fmt::print(stderr, "error: {}\nverify: {} is damaged\nhint: {}\n", e.what(), path, e.hint());
    return 1;
  }
  std::string dir = ft::resolve_checkpoint(local->dir);
  CkptKey key = key_if_any(key_file);
  ft::CheckpointManifest m;
  try {
    m = ft::CheckpointManifest::parse(ft::read_file(dir + "/manifest.json"), dir + "/manifest.json", nullptr);
    if (m.encrypted && key.empty())
      throw ft::Error(fmt::format("{}: the checkpoint is encrypted; verifying needs its key", dir),
                      "set FLUXTRAIN_CKPT_KEY or pass --key-file");
    m = ft::CheckpointManifest::load(dir, ptr(key));  // authenticates the manifest
  } catch (const ft::Error& e) {
    // A damaged manifest is what verify looks for, as a damaged piece is: exit 1 (docs/formats.md,
    // "Exit codes"); a wrong input (no checkpoint, another key, a newer format) stays exit 2.
    if (!ft::CheckpointManifest::is_damage(e)) throw;
    fmt::print(stderr, "error: {}\nverify: the manifest of {} is damaged\nhint: {}\n", e.what(), dir, e.hint());
    return 1;
  }
  ft::CheckpointReader reader(dir, m, ptr(key));
  std::vector<std::string> problems = reader.verify();
  int64_t pieces = 0;
  for (const auto& t : m.tensors) pieces += static_cast<int64_t>(t.pieces.size());
  if (!problems.empty()) {
    for (const auto& p : problems) fmt::print(stderr, "error: {}\n", p);
    fmt::print(stderr, "verify: {} problem(s) in {}\n", problems.size(), dir);
    fmt::print(stderr,
               "hint: the checkpoint is damaged: resume from an older one (`--resume auto` skips it), or give "
               "`fluxtrain ckpt verify` another step directory\n");
    return 1;
  }
  fmt::print("verify: ok — {} file(s), {} tensors, {} pieces: every {} and checksum matches ({})\n", m.files.size(),
             m.tensors.size(), pieces, m.encrypted ? "AES-256-GCM tag" : "header", dir);
  return 0;
}

int run_ckpt(int argc, char** argv) {
  CLI::App app{"Inspect, verify and convert checkpoints"};
  app.require_subcommand(1);
  std::string key_file;
  app.add_option("--key-file", key_file, "file with the 256-bit key (64 hex digits); default FLUXTRAIN_CKPT_KEY");

  std::string path, out;
  bool as_json = false;
  auto* ins = app.add_subcommand("inspect", "print a checkpoint's manifest");
  ins->add_option("ckpt", path, "checkpoint (step dir, checkpoint root or run dir)")->required();
  ins->add_flag("--json", as_json, "print the manifest JSON");
  ins->add_option("--key-file", key_file, "key file");

  std::string endpoint;
  ins->add_option("--s3-endpoint", endpoint, "S3-compatible endpoint URL; default AWS_ENDPOINT_URL or AWS");
  ins->add_option("--gcs-endpoint", endpoint, "GCS endpoint URL; default STORAGE_EMULATOR_HOST or Google's");
  auto* ver = app.add_subcommand("verify", "check every chunk tag and piece checksum");
  ver->add_option("ckpt", path, "checkpoint")->required();
  ver->add_option("--key-file", key_file, "key file");
  ver->add_option("--s3-endpoint", endpoint, "S3-compatible endpoint URL; default AWS_ENDPOINT_URL or AWS");
  ver->add_option("--gcs-endpoint", endpoint, "GCS endpoint URL; default STORAGE_EMULATOR_HOST or Google's");
  auto* ls = app.add_subcommand(
      "ls", "list the checkpoints under a root (a directory, s3://bucket/prefix or gs://bucket/prefix)");
  ls->add_option("root", path, "checkpoint root")->required();
  ls->add_option("--s3-endpoint", endpoint, "S3-compatible endpoint URL; default AWS_ENDPOINT_URL or AWS");
  ls->add_option("--gcs-endpoint", endpoint, "GCS endpoint URL; default STORAGE_EMULATOR_HOST or Google's");

  std::vector<std::string> sets;
  int64_t dp = 0, tp = 0, pp = 0, cp = 0, zero = -1;
  std::string cp_attention;
  bool encrypt = false;
  auto* rs = app.add_subcommand("reshard", "write a checkpoint under another parallel layout");
  rs->add_option("ckpt", path, "source checkpoint")->required();
  rs->add_option("out", out, "output step directory")->required();
  rs->add_option("--dp", dp, "data-parallel degree")->check(ft::cli::at_least(1));
  rs->add_option("--tp", tp, "tensor-parallel degree")->check(ft::cli::at_least(1));
  rs->add_option("--pp", pp, "pipeline stages")->check(ft::cli::at_least(1));
  rs->add_option("--cp", cp, "context-parallel degree")->check(ft::cli::at_least(1));
  rs->add_option("--cp-attention", cp_attention, "context-parallel attention schedule: ring or all_to_all");
  rs->add_option("--zero", zero, "ZeRO stage")->check(CLI::Range(0, 3));
  rs->add_option("--set", sets, "override another config key of the target, KEY=VALUE");
  rs->add_flag("--encrypt", encrypt, "encrypt the output with the key");
  rs->add_option("--key-file", key_file, "key file");

  auto* ex = app.add_subcommand("export-hf", "write a Hugging Face LlamaForCausalLM directory");
  ex->add_option("ckpt", path, "checkpoint")->required();
  ex->add_option("out", out, "output directory")->required();
  ex->add_option("--key-file", key_file, "key file");
  ex->add_option("--s3-endpoint", endpoint, "S3-compatible endpoint URL; default AWS_ENDPOINT_URL or AWS");
  ex->add_option("--gcs-endpoint", endpoint, "GCS endpoint URL; default STORAGE_EMULATOR_HOST or Google's");

  std::string config_path;
  auto* im = app.add_subcommand("import-hf", "turn a Hugging Face LLaMA directory into a checkpoint");
  im->add_option("hf_dir", path, "directory with config.json and model.safetensors")->required();
  im->add_option("out", out, "output checkpoint directory")->required();
  im->add_option("--config", config_path, "TOML config for the other sections (train, optim, data, ...)");
  im->add_option("--set", sets, "override a config key, KEY=VALUE");
  im->add_flag("--encrypt", encrypt, "encrypt the checkpoint with the key");
  im->add_option("--key-file", key_file, "key file");
  FT_PARSE(app, argc, argv);

  if (ins->parsed()) {
    Localized local(path, endpoint);
    return inspect(local.dir, key_file, as_json);
  }
  if (ver->parsed()) return verify(path, key_file, endpoint);
  if (ls->parsed()) return list_steps(path, endpoint);
  if (rs->parsed()) {
    std::string dir = ft::resolve_checkpoint(path);
    CkptKey key = key_if_any(key_file);
    ft::CheckpointManifest m = ft::CheckpointManifest::load(dir, ptr(key));
    ft::Config target = ft::config_from_json(m.config);
    ft::ConfigBinder b;
    target.bind(b);
    if (dp > 0) target.parallel.dp = dp;
    if (tp > 0) target.parallel.tp = tp;
    if (pp > 0) target.parallel.pp = pp;
    if (cp > 0) target.parallel.cp = cp;
    if (!cp_attention.empty()) b.set("parallel.cp_attention", ft::ConfigValue{cp_attention}, "--cp-attention");
    if (zero >= 0) target.parallel.zero = zero;
    for (const std::string& s : sets) {
      auto eq = s.find('=');
      if (eq == std::string::npos) throw ft::Error(fmt::format("--set {}: expected KEY=VALUE", s));
      b.set(s.substr(0, eq), ft::parse_config_value(s.substr(eq + 1)), "--set");
    }
    target.parallel.validate();
    target.validate();
    if (encrypt && key.empty()) throw ft::Error("--encrypt needs a key", "set FLUXTRAIN_CKPT_KEY or pass --key-file");
    ft::check_not_an_input(out, {dir}, "OUT", "checkpoint");
    ft::reshard_checkpoint(dir, out, target, ptr(key), encrypt || m.encrypted);
    ft::CheckpointManifest written;  // the target's layout fields, as the manifest now holds them
    const ft::ParallelConfig& t = target.parallel;
    written.world = t.world_size(), written.dp = t.dp, written.tp = t.tp, written.pp = t.pp, written.cp = t.cp;
    written.zero = t.zero;
    fmt::print("reshard: {} ({}) -> {} ({})\n", dir, m.layout_text(), out, written.layout_text());
    return 0;
  }
  if (ex->parsed()) {
    CkptKey key = key_if_any(key_file);
    Localized local(path, endpoint);
    const std::string dir = ft::resolve_checkpoint(local.dir);
    ft::check_not_an_input(out, {dir}, "OUT", "Hugging Face export");
    ft::export_hf(dir, out, ptr(key));
    fmt::print("export-hf: wrote {}/model.safetensors and config.json\n", out);
    return 0;
  }
  if (im->parsed()) {
    ft::check_not_an_input(out, {path}, "OUT", "checkpoint");
    if (std::filesystem::exists(out + ".toml"))  // its config, written beside it
      throw ft::Error(fmt::format("{}.toml already exists", out), "choose another OUT, or move the file away yourself");
    ft::Config base = ft::load_config(config_path, sets);
    CkptKey key = encrypt ? CkptKey::load(key_file) : CkptKey();
    ft::Config c = ft::import_hf(path, out, base, ptr(key));
    c.ckpt.resume = "";
    ft::write_file_atomic(out + ".toml", config_toml(c));
    fmt::print(
        "import-hf: wrote {} (model dim {}, {} layers) and its config {}.toml; continue training "
        "with\n"
        "  fluxtrain train --config {}.toml --resume {}{}\n",
        out, c.model.dim, c.model.n_layers, out, out, out,
        c.parallel.world_size() > 1 ? fmt::format(" --nproc {}", c.parallel.world_size()) : "");
    return 0;
  }
  return 0;
}

ft::cli::Register register_ckpt("ckpt", "inspect, verify, ls, reshard, export-hf, import-hf checkpoints", run_ckpt);

}  // namespace
