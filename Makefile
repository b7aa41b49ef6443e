# fluxtrain — thin wrapper over CMake. The two set-up commands of README.md:
#   make demo   install deps, build, prepare the built-in corpus, train, show results
#   make test   install deps, build, run every test (CTest: GoogleTest, mpirun, oracle)
#   make fuzz   every fuzzer for FUZZ_RUNS (1 M) executions each (not part of make test)
BUILD   ?= build
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test demo bench clean fuzz

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: deps
	@$(MAKE) --no-print-directory build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

# Every libFuzzer target (data readers, checkpoint readers, the config layer) for FUZZ_RUNS
# executions each — nightly-style, not in CI (hours on two cores; run niced).
FUZZ_RUNS ?= 1000000
fuzz: build
	FT_FUZZ_RUNS=$(FUZZ_RUNS) nice -n 10 tests/fuzz/run_fuzz.sh $(BUILD)
	FT_FUZZ_RUNS=$(FUZZ_RUNS) nice -n 10 tests/fuzz/run_ckpt_fuzz.sh $(BUILD)
	FT_FUZZ_RUNS=$(FUZZ_RUNS) nice -n 10 tests/fuzz/run_config_fuzz.sh $(BUILD)

demo: deps
	@$(MAKE) --no-print-directory build
	scripts/demo.sh

clean:
	rm -rf $(BUILD)
