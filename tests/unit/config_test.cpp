#include "config/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tensor/device_runtime.h"
#include "util/error.h"

namespace ft {
namespace {

std::string write_tmp(const std::string& text) {
  auto p = std::filesystem::temp_directory_path() / ("ft_cfg_" + std::to_string(::getpid()) + ".toml");
  std::ofstream(p) << text;
  return p.string();
}

std::string error_of(const std::string& file, const std::vector<std::string>& sets) {
  try {
    load_config(file, sets);
  } catch (const Error& e) {
    return std::string(e.what()) + " | " + e.hint();
  }
  return "";
}

TEST(Config, PresetThenFileThenOverrides) {
  auto f = write_tmp("[model]\npreset = \"llama-20m\"\nn_layers = 3\n[train]\nsteps = 7\n");
  Config c = load_config(f, {"train.steps=9", "optim.lr=1e-4"});
  EXPECT_EQ(c.model.dim, 384);
  EXPECT_EQ(c.model.n_layers, 3);
  EXPECT_EQ(c.train.steps, 9);
  EXPECT_DOUBLE_EQ(c.optim.lr, 1e-4);
}

TEST(Config, UnknownKeyNamesClosest) {
  auto f = write_tmp("[model]\nn_layer = 3\n");
  std::string e = error_of(f, {});
  EXPECT_NE(e.find("unknown config key 'model.n_layer'"), std::string::npos) << e;
  EXPECT_NE(e.find("model.n_layers"), std::string::npos) << e;
  EXPECT_NE(error_of("", {"train.step=3"}).find("train.steps"), std::string::npos);
}

TEST(Config, ShapesThatDoNotDivideNameBothNumbers) {
  std::string e = error_of("", {"model.n_heads=4", "model.n_kv_heads=3"});
  EXPECT_NE(e.find("n_heads = 4"), std::string::npos) << e;
  EXPECT_NE(e.find("n_kv_heads = 3"), std::string::npos) << e;
  e = error_of("", {"model.dim=100", "model.n_heads=3", "model.n_kv_heads=1"});
  EXPECT_NE(e.find("dim = 100"), std::string::npos) << e;
  EXPECT_NE(e.find("n_heads = 3"), std::string::npos) << e;
}

TEST(Config, WrongTypeAndBadEnum) {
  EXPECT_NE(error_of("", {"train.steps=abc"}).find("expected an integer"), std::string::npos);
  EXPECT_NE(error_of("", {"train.precision=fp8"}).find("\"bf16\""), std::string::npos);
}

// Issue 30 point 25: --set reads integers as TOML does (0x, 0o, 0b, underscores), and an integer
// key takes a float that is a whole number below 2^53 (1e3), from --set and the file alike.
TEST(Config, IntegersAsTomlWritesThem) {
  for (auto [text, want] :
       {std::pair{"0x10", 16}, {"0o20", 16}, {"0b10000", 16}, {"1_000", 1000}, {"1e3", 1000}, {"16.0", 16}}) {
    EXPECT_EQ(load_config("", {std::string("train.steps=") + text}).train.steps, want) << text;
    EXPECT_EQ(load_config(write_tmp(std::string("[train]\nsteps = ") + text + "\n"), {}).train.steps, want) << text;
  }
  EXPECT_NE(error_of("", {"train.steps=1.5"}).find("train.steps = 1.5 is not valid: expected an integer"),
            std::string::npos);
  EXPECT_NE(error_of("", {"train.steps=1e30"}).find("is not valid: expected an integer"), std::string::npos);
  EXPECT_NE(error_of("", {"train.threads=0x100000000"}).find("in range"), std::string::npos);
  EXPECT_NE(error_of("", {"train.steps=0xZZ"}).find("expected an integer"), std::string::npos);
  // A float too small for a double is not silently 0 (point 19); 0 written as such is.
  EXPECT_NE(error_of("", {"optim.lr=1e-400"}).find("optim.lr = 1e-400 is too small for a double"), std::string::npos);
  EXPECT_NE(error_of(write_tmp("[optim]\nlr = 1e-400\n"), {}).find("optim.lr = 1e-400 is too small"),
            std::string::npos);
  EXPECT_EQ(load_config(write_tmp("[optim]\nlr = 0.0\n"), {"optim.weight_decay=0e0"}).optim.lr, 0.0);
}

// Issue 30 point 10: values that crashed or overflowed a run are refused at load.
TEST(Config, SizesThatWouldOverflowAreRefused) {
  EXPECT_NE(error_of("", {"model.vocab_size=1"}).find("expected an integer from 2 to 2147483647"), std::string::npos);
  EXPECT_NE(error_of("", {"train.threads=4097"}).find("expected an integer from 0 to 4096"), std::string::npos);
  EXPECT_EQ(load_config("", {"train.threads=4096"}).train.threads, 4096);
  EXPECT_NE(error_of("", {"train.batch_size=9223372036854775807", "train.micro_batch_size=1"}).find("tokens per step"),
            std::string::npos);
  EXPECT_NE(error_of("", {"train.batch_size=2097152", "train.micro_batch_size=1"}).find("micro-batches per rank"),
            std::string::npos);
  EXPECT_NE(error_of("", {"model.ffn_dim=4611686018427387904"}).find("more than the 2^60"), std::string::npos);
  EXPECT_NE(error_of("", {"model.dim=0"}).find("| set model.dim to an integer >= 1"), std::string::npos);
}

// train.device: "cpu" (the default), "cuda" or "auto"; whether a GPU can be used is the trainer's
// question (the device runtime), so the config accepts "cuda"; any other value names what is
// accepted.
TEST(Config, TrainDeviceNamesCpuCudaOrAuto) {
  EXPECT_EQ(load_config("", {}).train.device, "cpu");
  EXPECT_EQ(load_config("", {"train.device=\"cpu\""}).train.compute_device(), Device::kCPU);
  EXPECT_EQ(load_config("", {"train.device=\"cuda\""}).train.compute_device(), Device::kCUDA);
  // No CUDA runtime is registered in this test binary: "auto" is the CPU.
  ASSERT_EQ(device_count(Device::kCUDA), 0);
  EXPECT_EQ(load_config("", {"train.device=\"auto\""}).train.compute_device(), Device::kCPU);
  const std::string e = error_of("", {"train.device=\"tpu\""});
  EXPECT_NE(e.find("train.device = \"tpu\" is not a device fluxtrain knows: expected \"cpu\", \"cuda\" or \"auto\""),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("| set train.device = \"cpu\""), std::string::npos) << e;
}

// The fp16 gradient wire needs loss-scaled gradients: with fp16 training it loads, with fp32 or
// bf16 training it is refused in one line naming both keys, the hint offering bf16.
TEST(Config, Fp16GradientWireOnlyWithFp16Training) {
  const std::string wire = "parallel.grad_compression=\"fp16\"";
  Config c = load_config("", {wire, "train.precision=\"fp16\"", "parallel.dp=2"});
  EXPECT_EQ(c.parallel.grad_compression, GradCompression::kFP16);
  for (const char* p : {"fp32", "bf16"}) {
    const std::string e = error_of("", {wire, std::string("train.precision=\"") + p + "\""});
    EXPECT_NE(e.find(std::string("parallel.grad_compression = \"fp16\" needs train.precision = \"fp16\" (loss-scaled "
                                 "gradients); it is \"") +
                     p + "\""),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("| use parallel.grad_compression = \"bf16\""), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

// Issue 14: inf / nan parse as numbers but are no setting's value; a directory is no config file.
TEST(Config, NonFiniteFloatsAndDirectoriesRefused) {
  for (const char* v : {"inf", "-inf", "nan", "+inf"}) {
    EXPECT_NE(error_of("", {std::string("optim.lr=") + v}).find("expected a finite number"), std::string::npos) << v;
  }
  auto f = write_tmp("[model]\nnorm_eps = nan\n");
  EXPECT_NE(error_of(f, {}).find(f + ": model.norm_eps = nan is not valid: expected a finite number"),
            std::string::npos);
  auto dir = std::filesystem::temp_directory_path() / ("ft_cfg_dir_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_NE(error_of(dir.string(), {}).find("is a directory, not a TOML file"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(Config, PresetsHaveLlamaShapes) {
  ModelConfig m = model_preset("llama2-7b");
  EXPECT_EQ(m.dim, 4096);
  EXPECT_EQ(m.ffn_dim, 11008);
  EXPECT_NEAR(static_cast<double>(m.num_params()), 6.74e9, 0.01e9);
  EXPECT_NEAR(static_cast<double>(model_preset("llama2-13b").num_params()), 13.0e9, 0.05e9);
  EXPECT_NEAR(static_cast<double>(model_preset("llama2-70b").num_params()), 68.98e9, 0.05e9);
  EXPECT_THROW(model_preset("llama3"), Error);
}

}  // namespace
}  // namespace ft
