# fluxtrain — thin wrapper over CMake. The two set-up commands of README.md:
#   make demo   install deps, build, prepare the built-in corpus, train, show results
#   make test   install deps, build, run every test (CTest: GoogleTest, mpirun, oracle)
BUILD   ?= build
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test demo bench clean

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

demo: deps
	@$(MAKE) --no-print-directory build
	scripts/demo.sh

clean:
	rm -rf $(BUILD)
