# Thin wrapper around CMake. `make` builds build/bin/latte; `make test` builds and runs the tests.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure test demo bench clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/install-deps.sh

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

# Builds (installing dependencies if needed) and tells a story with the shipped tiny MLA model.
demo: all
	$(BUILD)/bin/latte run -p "Once upon a time" -n 200 --echo

# The standard benchmark set (llama-bench style, with the DRAM roofline) on a synthetic
# DeepSeek-V2-Lite Q4_0: exact geometry, random weights, ~8.3 GiB, written once by `latte synth`
# into the build directory. BENCH_MODEL=FILE benchmarks another model; BENCH_FLAGS changes the set.
BENCH_MODEL ?= $(BUILD)/synth/deepseek-v2-lite-q4_0.gguf
BENCH_FLAGS ?= -p 512 -n 128 -d 0,4096 -r 3 --roofline
bench: all
	@test -f $(BENCH_MODEL) || { mkdir -p $(dir $(BENCH_MODEL)) && \
	  $(BUILD)/bin/latte synth --preset v2-lite --type q4_0 -o $(BENCH_MODEL); }
	$(BUILD)/bin/latte bench -m $(BENCH_MODEL) $(BENCH_FLAGS)

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD)
