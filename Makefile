# fluxtrain — thin wrapper over CMake. The two set-up commands of README.md:
#   make demo   install deps, build, prepare the built-in corpus, train, show results
#   make test   install deps, build, run every test (CTest: GoogleTest, mpirun, oracle), then
#               the portable pass (test-portable) so the AVX2 path is tested on any CPU
#   make fuzz   every fuzzer for FUZZ_RUNS (1 M) executions each (not part of make test)
# Developer targets (README, "Developing"): unit, bench, asan, poison, format, format-check.
BUILD   ?= build
# The portable pass: an x86-64-v3 (AVX2 + FMA) build whose tests run with oneDNN and OpenBLAS
# held to AVX2 — what an AVX2-only CPU runs, tested on an AVX-512 or AMX machine too. It builds
# and runs only the tests whose code paths depend on the ISA (label isa: kernels, tensors,
# training numerics; the oracle tests against PyTorch; the short distributed subset, label
# portable): parsers, planners and servers are the same code on every ISA, and the CUDA backend
# and the fuzzers run in the native pass. On a CPU without AVX-512 the native build already is
# the AVX2 path, so the pass says so and stops (PORTABLE=always runs it anyway).
PORTABLE_BUILD ?= build-portable
PORTABLE_LABELS ?= isa|oracle|portable
PORTABLE_EXCLUDE ?= fuzz
PORTABLE ?= auto
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test test-portable portable-pass unit asan poison bench format format-check demo clean fuzz

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS) $(if $(TARGET),--target $(TARGET))

test: deps
	@$(MAKE) --no-print-directory build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900
	@$(MAKE) --no-print-directory test-portable

test-portable:
	@if [ "$(PORTABLE)" = auto ] && ! $${CXX:-c++} -march=native -dM -E -x c++ /dev/null | grep -q __AVX512F__; then \
	  echo "test-portable: skipped: this CPU has no AVX-512, so the native build already ran the AVX2 path (PORTABLE=always runs it)"; \
	else \
	  $(MAKE) --no-print-directory portable-pass; \
	fi

portable-pass:
	@$(MAKE) --no-print-directory build BUILD=$(PORTABLE_BUILD) TARGET=portable-tests CMAKE_FLAGS="-DFT_ARCH=x86-64-v3 -DFT_CUDA=OFF"
	cd $(PORTABLE_BUILD) && ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell \
	  ctest --output-on-failure -j $(JOBS) --timeout 900 -L "$(PORTABLE_LABELS)" -LE "$(PORTABLE_EXCLUDE)"

# The fast tests only (label "unit": no MPI ranks, no servers) — the edit-compile loop.
unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

# AddressSanitizer + UndefinedBehaviorSanitizer build (FT_SANITIZE=ON) and its unit tests.
ASAN_BUILD ?= build-asan
asan:
	@$(MAKE) --no-print-directory build BUILD=$(ASAN_BUILD) CMAKE_FLAGS="-DFT_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo"
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

# The poison build (FT_POISON=ON): every buffer from mem_alloc starts as 0xFF bytes (NaN) and
# freed memory is poisoned before it is zeroed, so a read of memory nothing wrote fails a test.
POISON_BUILD ?= build-poison
poison:
	@$(MAKE) --no-print-directory build BUILD=$(POISON_BUILD) CMAKE_FLAGS="-DFT_POISON=ON"
	cd $(POISON_BUILD) && ctest --output-on-failure -j $(JOBS) -L "unit|dist"

# The side-by-side benchmarks that finish in minutes (bench/README.md has them all): every op of
# the harness against the machine's GEMM and bandwidth peaks, attention against PyTorch, the
# step's GEMM shapes.
bench: build
	OMP_NUM_THREADS=1 $(BUILD)/bench/bench_ops --clock cpu
	$(BUILD)/bench/attention_bench
	$(BUILD)/bench/bench_gemm_shapes --clock cpu

# clang-format (.clang-format) over every tracked C++ file; CI runs format-check.
FORMAT_FILES = $(shell git ls-files '*.cpp' '*.h' '*.cc' '*.inc' '*.cu' '*.cuh')
format:
	@clang-format -i $(FORMAT_FILES)
format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format-check: $(words $(FORMAT_FILES)) files as .clang-format writes them"

# Every libFuzzer target (data readers, checkpoint readers, the config layer) for FUZZ_RUNS
# executions each — nightly-style, not in CI (hours on two cores; run niced).
FUZZ_RUNS ?= 1000000
fuzz: build
	FT_FUZZ_RUNS=$(FUZZ_RUNS) nice -n 10 tests/fuzz/run_fuzz.sh $(BUILD)
	FT_FUZZ_RUNS=$(FUZZ_RUNS) nice -n 10 tests/fuzz/run_ckpt_fuzz.sh $(BUILD)
	FT_FUZZ_RUNS=$(FUZZ_RUNS) nice -n 10 tests/fuzz/run_config_fuzz.sh $(BUILD)
	FT_FUZZ_RUNS=$(FUZZ_RUNS) nice -n 10 tests/fuzz/run_cli_fuzz.sh $(BUILD)

demo: deps
	@$(MAKE) --no-print-directory build
	scripts/demo.sh

clean:
	rm -rf $(BUILD) $(PORTABLE_BUILD)
