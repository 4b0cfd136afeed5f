# Thin wrapper around CMake. `make` builds build/bin/latte and the test suites; `make test` builds
# and runs the tests; `make demo` builds only latte. The first run installs missing Debian
# packages (with sudo when not root; see scripts/install-deps.sh).
# make LATTE_CUDA=1: also build the CUDA backend (in build-cuda/ unless BUILD is given).
ifeq ($(LATTE_CUDA),1)
BUILD ?= build-cuda
CMAKE_FLAGS += -DLATTE_CUDA=ON
endif
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
PREFIX ?= /usr/local

.PHONY: all deps configure latte test test-aarch64 demo bench install uninstall clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/install-deps.sh

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

# Only the latte binary (not the test suites).
latte: configure
	cmake --build $(BUILD) -j $(JOBS) --target latte

# Builds latte alone (installing dependencies if needed) and tells a story with the shipped tiny
# MLA model.
demo: latte
	$(BUILD)/bin/latte run -p "Once upon a time" -n 200 --echo

# $(PREFIX)/bin/latte, and the shipped tiny model in $(PREFIX)/share/latte/models, where an
# installed latte looks for its default model. DESTDIR is honoured for packaging.
install: latte
	install -D -m 755 $(BUILD)/bin/latte $(DESTDIR)$(PREFIX)/bin/latte
	install -D -m 644 models/tiny-mla-stories-f32.gguf $(DESTDIR)$(PREFIX)/share/latte/models/tiny-mla-stories-f32.gguf

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/latte $(DESTDIR)$(PREFIX)/share/latte/models/tiny-mla-stories-f32.gguf

# The standard benchmark set (llama-bench style, with the DRAM roofline) on a synthetic
# DeepSeek-V2-Lite Q4_0: exact geometry, random weights, ~8.3 GiB, written once by `latte synth`
# into the build directory. BENCH_MODEL=FILE benchmarks another model; BENCH_FLAGS changes the set.
BENCH_MODEL ?= $(BUILD)/synth/deepseek-v2-lite-q4_0.gguf
BENCH_FLAGS ?= -p 512 -n 128 -d 0,4096 -r 3 --roofline
bench: latte
	@test -f $(BENCH_MODEL) || { mkdir -p $(dir $(BENCH_MODEL)) && \
	  $(BUILD)/bin/latte synth --preset v2-lite --type q4_0 -o $(BENCH_MODEL); }
	$(BUILD)/bin/latte bench -m $(BENCH_MODEL) $(BENCH_FLAGS)

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The aarch64 cross build (cmake/aarch64-linux-gnu.cmake) in $(BUILD_AARCH64), and the test
# suites whose results can differ by architecture under qemu-aarch64, two emulator starts (shards)
# per suite: the kernels and their dispatch, fp16, the quantizers (byte-exact; the compiler may fuse
# their float arithmetic differently), the graph ops, the forward fixtures (each once;
# tests/CMakeLists.txt LATTE_EMULATED_TESTS), the tokenizers (char is unsigned on aarch64).
# `make test-aarch64 AARCH64_SUITES="..."` picks others (the GGUF reader's are byte I/O).
BUILD_AARCH64 ?= build-aarch64
AARCH64_SUITES ?= test_ggml_core test_ggml_quant test_ggml_cpu test_ggml_graph test_model test_tokenizer
empty :=
space := $(empty) $(empty)
test-aarch64:
	@scripts/install-deps.sh --aarch64
	@test -f $(BUILD_AARCH64)/CMakeCache.txt || \
	  cmake -S . -B $(BUILD_AARCH64) -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake $(CMAKE_FLAGS)
	cmake --build $(BUILD_AARCH64) -j $(JOBS) --target latte $(AARCH64_SUITES)
	cd $(BUILD_AARCH64) && ctest --output-on-failure -j $(JOBS) -R '^($(subst $(space),|,$(strip $(AARCH64_SUITES))))_shard[0-9]$$'

clean:
	rm -rf $(BUILD) $(BUILD_AARCH64)
