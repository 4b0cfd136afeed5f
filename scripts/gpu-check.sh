#!/usr/bin/env bash
# The whole GPU check in one command, for a lent GPU machine (docs/offload.md, "The GPU check"):
#  1. builds latte and the device test executables with CUDA for this machine's GPU only
#     (build-gpu/, -DCMAKE_CUDA_ARCHITECTURES from nvidia-smi's compute_cap, else 90);
#  2. runs the device tests (test_ggml_cuda, test_ggml_registry, test_ggml_backend, the offload
#     tests of test_runtime, and test_placement): with a GPU, a device test that skips fails; one
#     that skips or fails for want of a shared fixture is listed apart (the whole of ../shared does
#     not fit in what travels to a lent machine: --bundle-deps takes the GPU fixture tests' files);
#  3. writes a tiny synthetic Q4_0 model and a few layers of a synthetic V2-Lite Q4_0;
#  4. runs small forwards with everything on the GPU, and one with the experts on the CPU, under
#     compute-sanitizer (memcheck): any error it reports fails the step;
#  5. latte bench -ngl 0,99 and -ngl 99 --cpu-moe on the synthetic V2-Lite;
# and ends with one table: each step, PASS/FAIL, seconds, the key numbers. A failed step does not
# stop the later ones (a failed build does); the exit status is 0 only when every step passed.
#
#   scripts/gpu-check.sh                 on the GPU machine. Without a GPU it builds, reports every
#                                        device step as NO-GPU and exits 2, saying why.
#   scripts/gpu-check.sh --no-gpu        rehearsal without a GPU: every step that can run on the CPU
#                                        (tests may skip, the forwards run without the sanitizer,
#                                        the bench on the CPU); exits 0 when they pass.
#   scripts/gpu-check.sh --bundle-deps   on a Debian 12 machine with apt: downloads the build's
#                                        library packages into .gpu-deps/ (see below), copies the
#                                        GPU fixture tests' files of ../shared there, and exits.
#
# Environment:
#   LATTE_SHARED   the shared fixtures (else ../shared, else the bundle's shared/ (--bundle-deps),
#                  else ./shared beside the scripts' repo)
#   OUT            where the logs go (the device tool copies $OUT back; at most 8 files there),
#                  else build-gpu/gpu-check-logs
#   LATTE_GPU_CHECK_LAYERS  layers of the synthetic V2-Lite for the bench (default 4: 1.2 GiB)
#   LATTE_CUDA_ARCH         the CUDA architecture to build for, instead of asking nvidia-smi
#   LATTE_GPU_DEPS          the package bundle (default .gpu-deps/ in the repository)
#
# The build's libraries (fmt, CLI11, nlohmann-json, xsimd, PCRE2, libedit, cpp-httplib, GoogleTest, pkg-config)
# may be missing on the GPU machine, which has no network: `--bundle-deps` here puts their Debian
# packages in .gpu-deps/ (ignored by git through .git/info/exclude; carry it), and this script
# unpacks them into build-gpu/deps/ and builds against them whenever that folder exists.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build-gpu"
bundle="${LATTE_GPU_DEPS:-$root/.gpu-deps}"
# Library packages of the build (scripts/install-deps.sh's list, less the compilers and tools a
# CUDA machine has) and the runtime libraries they link, for a machine with g++ and nothing else.
# cpp-httplib (latte serve) is compiled with OpenSSL, zlib and Brotli support: its header includes
# theirs and its .pc file requires theirs, so their -dev packages come too, with the runtime
# libraries a bare CUDA image may lack (libssl3, libbrotli1; zlib1g is in every Ubuntu).
bundle_packages=(libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev libxsimd-dev xtl-dev libpcre2-dev libpcre2-8-0
                 libedit-dev libedit2 libbsd0 libmd0 libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libssl3
                 zlib1g-dev libbrotli-dev libbrotli1 libgtest-dev libgmock-dev pkgconf pkgconf-bin libpkgconf3
                 pkg-config)

mode=gpu
case "${1:-}" in
  "") ;;
  --no-gpu) mode=rehearsal ;;
  --bundle-deps) mode=bundle ;;
  -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "gpu-check.sh: unknown option '$1' (--no-gpu, --bundle-deps, --help)" >&2; exit 2 ;;
esac

if [ "$mode" = bundle ]; then
  mkdir -p "$bundle" || exit 1
  echo "gpu-check: downloading ${#bundle_packages[@]} packages into $bundle"
  (cd "$bundle" && apt-get download "${bundle_packages[@]}") || {
    echo "gpu-check: apt-get download failed (run apt-get update first?)" >&2
    exit 1
  }
  # The fixtures of GpuOffloadFixture (test_offload_session.cpp), which the lent machine does not
  # have (../shared does not travel), less ds2-v2-tiny-f32 (25 MB: the whole tree that travels is
  # at most 64 MiB); the GPU machine reads them from $bundle/shared when there is no ../shared.
  if [ -d "$root/../shared/fixtures" ]; then
    for f in ds2-mini-mla-f32.{gguf,tokens.txt,logits.f32} ds2-v2-tiny-q8_0.{gguf,tokens.txt,exact-logits.f32} \
      ds3-tiny-q4_0.{gguf,tokens.txt,exact-logits.f32} llama-gqa-tiny-f32.{gguf,tokens.txt,logits.f32} \
      kquant/kq-tiny-q4_k_m.{gguf,exact-logits.f32} kquant/kq-tiny.tokens.txt; do
      mkdir -p "$(dirname "$bundle/shared/fixtures/$f")" && cp "$root/../shared/fixtures/$f" "$bundle/shared/fixtures/$f" || exit 1
    done
    echo "gpu-check: copied $(find "$bundle/shared" -type f | wc -l) fixture files into $bundle/shared"
  else
    echo "gpu-check: no $root/../shared/fixtures: the GPU fixture tests will skip there" >&2
  fi
  case "$bundle" in
    "$root"/*)
      rel=${bundle#"$root"/}
      if ! git -C "$root" check-ignore -q "$rel/x.deb"; then
        exclude=$(git -C "$root" rev-parse --git-path info/exclude)
        case "$exclude" in /*) ;; *) exclude="$root/$exclude" ;; esac
        mkdir -p "$(dirname "$exclude")" && echo "/$rel/" >>"$exclude"
        echo "gpu-check: added /$rel/ to $exclude"
      fi
      echo "gpu-check: $(du -sh "$bundle" | cut -f1) in $rel/; on the GPU machine: run(command='scripts/gpu-check.sh', carry=['$rel'])" ;;
    *) echo "gpu-check: $(du -sh "$bundle" | cut -f1) in $bundle; the script there reads LATTE_GPU_DEPS=$bundle" ;;
  esac
  exit 0
fi

logs="${OUT:-$build/gpu-check-logs}"
work="$build/gpu-check"  # models and logits: too large for $OUT
mkdir -p "$logs" "$work" || exit 1
logs=$(cd "$logs" && pwd)
jobs=$(nproc)
t_start=$(date +%s)

say() { printf 'gpu-check: %s\n' "$*"; }

# ---- the steps' records, for the summary table --------------------------------------------------
names=() results=() times=() details=()
record() {  # name result seconds details
  names+=("$1") results+=("$2") times+=("$3") details+=("$4")
  say "$1: $2 (${3}s) $4"
}
since() { echo $(($(date +%s) - $1)); }
# The last lines of a log, indented, where a step failed (the device tool shows the output's end).
show_tail() {
  echo "---- $2: last $3 lines of $1"
  tail -n "$3" "$1" | sed 's/^/  | /'
}

summary() {
  local total i fails=0 w=0
  total=$(since "$t_start")
  for i in "${!names[@]}"; do
    ((${#names[i]} > w)) && w=${#names[i]}
    [ "${results[i]}" = PASS ] || [ "${results[i]}" = SKIP ] || fails=$((fails + 1))
  done
  {
    echo
    echo "== gpu-check summary ($mode mode; $gpu_text; ${total}s; logs in $logs)"
    printf '%-*s  %-7s  %5s  %s\n' "$w" step result sec details
    for i in "${!names[@]}"; do
      printf '%-*s  %-7s  %5s  %s\n' "$w" "${names[i]}" "${results[i]}" "${times[i]}" "${details[i]}"
    done
  } | tee "$logs/summary.txt"
  ((total > 480)) && echo "gpu-check: note: took ${total}s, over the 8 minutes it is meant to fit" | tee -a "$logs/summary.txt"
  if [ "$mode" = gpu ] && [ -z "$gpu_name" ]; then
    echo "gpu-check: FAILED: no GPU ($gpu_why); the device steps did not run" | tee -a "$logs/summary.txt"
    exit 2
  fi
  if ((fails > 0)); then
    echo "gpu-check: FAILED: $fails of ${#names[@]} steps" | tee -a "$logs/summary.txt"
    exit 1
  fi
  echo "gpu-check: all ${#names[@]} steps passed" | tee -a "$logs/summary.txt"
  exit 0
}

# ---- the GPU ---------------------------------------------------------------------------------------
t=$(date +%s)
gpu_name="" gpu_why="" cap="" gpu_more=""
if ! command -v nvidia-smi >/dev/null 2>&1; then
  gpu_why="nvidia-smi not found"
elif ! gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -n 1) || [ -z "$gpu_name" ] ||
  [[ $gpu_name == *"failed"* || $gpu_name == *"No devices"* || $gpu_name == *"rror"* ]]; then
  gpu_why="nvidia-smi: ${gpu_name:-no answer}"
  gpu_name=""
else
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' ')
  gpu_more=$(nvidia-smi --query-gpu=memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
  nvidia-smi >"$logs/gpu.txt" 2>&1
fi
if [ -n "${LATTE_CUDA_ARCH:-}" ]; then
  arch=$LATTE_CUDA_ARCH
elif [[ $cap =~ ^[0-9]+\.[0-9]+$ ]]; then
  arch=${cap/./}
else
  arch=90
fi
if [ -n "$gpu_name" ]; then
  gpu_text="$gpu_name, sm_$arch"
  [ "$mode" = rehearsal ] && { say "--no-gpu given, but a GPU is here ($gpu_name): rehearsing anyway"; }
  record gpu PASS "$(since "$t")" "$gpu_text (compute_cap ${cap:-unknown}; memory, driver: ${gpu_more:-unknown})"
else
  gpu_text="no GPU: $gpu_why"
  if [ "$mode" = gpu ]; then
    record gpu NO-GPU "$(since "$t")" "$gpu_why; building for sm_$arch, then stopping"
  else
    record gpu SKIP "$(since "$t")" "$gpu_why (--no-gpu: building for sm_$arch and running on the CPU)"
  fi
fi
on_gpu() { [ -n "$gpu_name" ]; }

# ---- the shared fixtures ---------------------------------------------------------------------------
if [ -n "${LATTE_SHARED:-}" ]; then
  shared=$LATTE_SHARED
elif [ -d "$root/../shared" ]; then
  shared="$root/../shared"
elif [ -d "$bundle/shared" ]; then
  shared="$bundle/shared"
else
  shared="$root/shared"
fi
[ -d "$shared" ] && shared=$(cd "$shared" && pwd)
export LATTE_SHARED="$shared"  # the tests read it too
[ -d "$shared/fixtures" ] || say "warning: no fixtures in $shared: the tests that need them skip or fail (reported apart)"

# ---- configure and build ---------------------------------------------------------------------------
t=$(date +%s)
build_log="$logs/build.log"
: >"$build_log"
cmake_args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLATTE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch"
            -DLATTE_SHARED_DIR="$shared")
# The generator of an existing tree stays; a new one is Ninja where there is one.
[ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1 && cmake_args+=(-G Ninja)
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cmake_args+=(-DCMAKE_CUDA_COMPILER="$nvcc_bin")
# Debian's toolkit 11.8 rejects GCC 12 (as in .ci/run).
"$nvcc_bin" --version 2>/dev/null | grep -q "release 11\." && cmake_args+=(-DCMAKE_CUDA_HOST_COMPILER=clang++-14)
# CMake 4 refuses the cmake_minimum_required of older packages' config files without this.
export CMAKE_POLICY_VERSION_MINIMUM=3.5
deps_note="system libraries"
if compgen -G "$bundle/*.deb" >/dev/null; then
  prefix="$build/deps"
  multiarch="$(uname -m)-linux-gnu"
  rm -rf "$prefix" && mkdir -p "$prefix"
  unpack() {  # a .deb's files into $prefix: dpkg-deb, else ar and tar (which sees the compression)
    if command -v dpkg-deb >/dev/null 2>&1; then
      dpkg-deb -x "$1" "$prefix"
    else
      local tmp rc
      tmp=$(mktemp -d) || return 1
      (cd "$tmp" && ar x "$1") && tar -xf "$tmp"/data.tar.* -C "$prefix"
      rc=$?
      rm -rf "$tmp"
      return $rc
    fi
  }
  for deb in "$bundle"/*.deb; do
    unpack "$deb" || echo "gpu-check: could not unpack $deb" | tee -a "$build_log"
  done
  # The .pc files name /usr: point them at the unpacked tree.
  find "$prefix" -name '*.pc' -exec sed -i -E "s#=/usr(/|\$)#=$prefix/usr\\1#" {} +
  export PKG_CONFIG_PATH="$prefix/usr/lib/$multiarch/pkgconfig:$prefix/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$prefix/usr/lib/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  cmake_args+=(-DCMAKE_PREFIX_PATH="$prefix/usr")
  pkg-config --version >/dev/null 2>&1 || cmake_args+=(-DPKG_CONFIG_EXECUTABLE="$prefix/usr/bin/pkgconf")
  deps_note="packages of $(basename "$bundle")/ ($(find "$bundle" -name '*.deb' | wc -l) .deb)"
fi
targets=(latte test_ggml_cuda test_ggml_registry test_ggml_backend test_placement test_runtime)
say "building ${#targets[@]} targets for sm_$arch with $jobs jobs into $build ($deps_note; log: $build_log)"
if ! cmake "${cmake_args[@]}" >>"$build_log" 2>&1; then
  show_tail "$build_log" "configure" 30
  missing=$(grep -oE 'Could not find a package configuration file provided by "[^"]+"|package .[^ ]+. not found|Could NOT find [A-Za-z0-9_]+' "$build_log" | sort -u | tr '\n' ';')
  record build FAIL "$(since "$t")" "cmake configure failed${missing:+: $missing} (libraries missing? see --bundle-deps)"
  summary
fi
if ! cmake --build "$build" -j "$jobs" --target "${targets[@]}" >>"$build_log" 2>&1; then
  show_tail "$build_log" "build" 40
  record build FAIL "$(since "$t")" "see $build_log"
  summary
fi
latte="$build/bin/latte"
record build PASS "$(since "$t")" "sm_$arch, ${#targets[@]} targets, $jobs jobs, $deps_note"

if [ "$mode" = gpu ] && ! on_gpu; then
  for s in device-tests models sanitizer bench-ngl bench-cpu-moe; do record "$s" NO-GPU 0 "not run: $gpu_why"; done
  summary
fi

# ---- device tests ------------------------------------------------------------------------------------
# Suites of test_ggml_cuda, test_ggml_registry, test_ggml_backend and test_runtime's offload tests:
# with a GPU each must run. test_placement's run too; one of its tests skips by design on a GPU.
device_suites='Fixtures/GpuOffloadBatch|BackendOps|CudaBlockDecode|CudaExpertTiles|CudaGraphOpsSupports|CudaHostMath|CudaSupports|GpuDevices|BackendSplit|OffloadSession|Fixtures/OffloadFixture|Fixtures/GpuOffloadFixture'
device_re="^($device_suites)\\."
tests_re="^($device_suites|Placement|PlanCli)\\."
t=$(date +%s)
tests_log="$logs/tests.log"
rm -f "$logs/tests.xml"
(cd "$build" && timeout -k 10 300 ctest -j "$jobs" --timeout 240 --output-on-failure -R "$tests_re" \
  --output-junit "$logs/tests.xml") >"$tests_log" 2>&1
rc=$?
# "100% tests passed, 0 tests failed out of 68" (CMake 3), "100% tests passed out of 68" (CMake 4).
ctest_summary=$(grep -E 'tests passed.*out of [0-9]+' "$tests_log" | tail -n 1)
total=$(grep -oE 'out of [0-9]+' <<<"$ctest_summary" | grep -oE '[0-9]+')
failed=$(grep -oE '[0-9]+ tests failed' <<<"$ctest_summary" | grep -oE '^[0-9]+')
[ -n "$total" ] && [ -z "$failed" ] && failed=0
# From the JUnit file (ctest >= 3.21), one line per test that did not pass: "skip|fail<TAB>name<TAB>
# reason", the reason "fixture" where its output names a file of $shared it could not find.
notes=$(awk -v shared="$shared/" '
  /<testcase / { match($0, /name="[^"]*"/); name = substr($0, RSTART + 6, RLENGTH - 7)
                 state = $0 ~ /status="notrun"/ ? "skip" : $0 ~ /status="fail"/ ? "fail" : ""; reason = "" }
  state != "" && index($0, shared) && (/shared file missing/ || /cannot open: No such file/) { reason = "fixture" }
  state == "skip" && reason == "" && /SKIPPED: / { reason = $0; sub(/.*SKIPPED: /, "", reason) }
  /<\/testcase>/ { if (state != "") print state "\t" name "\t" reason; state = "" }' "$logs/tests.xml" 2>/dev/null)
count() { printf '%s' "$1" | grep -c . || true; }
skips=$(printf '%s\n' "$notes" | grep '^skip' || true)
[ -f "$logs/tests.xml" ] || skips=$(grep -E '\*\*\*Skipped' "$tests_log" | sed -E 's/.*Test +#[0-9]+: ([^ ]+) .*/skip\t\1\t/')
fixture=$(printf '%s\n' "$notes" | grep -E $'\tfixture$' || true)
n_skipped=$(count "$skips")
n_fixture=$(count "$fixture")
n_fixture_fails=$(printf '%s\n' "$fixture" | grep -c '^fail' || true)
# The tests that want a shared fixture run on the simulated device, not the GPU (the offload and
# split tests, test_placement's): where it is missing they are reported, not counted. Any other
# skip of a device suite fails when there is a GPU.
device_skips=$(printf '%s\n' "$skips" | grep -vE $'\tfixture$' | cut -f2 | grep -E "$device_re" || true)
n_device_skips=$(count "$device_skips")
d="$((${total:-0} - n_skipped)) ran, ${failed:-?} failed, $n_skipped skipped (of ${total:-0})"
if ((n_fixture > 0)); then
  d="$d; $((n_fixture - n_fixture_fails)) skips and $n_fixture_fails failures for shared files missing in $shared"
  echo "---- tests that skipped or failed for shared files missing in $shared (per suite):"
  printf '%s\n' "$fixture" | cut -f1,2 | sed -E 's/\t([^.]*)\..*/ \1/' | sort | uniq -c | sed 's/^/  | /'
fi
if [ -z "$total" ] || [ "$total" = 0 ]; then
  show_tail "$tests_log" "device tests" 20
  record device-tests FAIL "$(since "$t")" "no tests ran (ctest exit $rc)"
elif { [ "$rc" -ne 0 ] && [ "${failed:-1}" = 0 ]; } || [ "${failed:-1}" != "$n_fixture_fails" ]; then
  grep -E '^\s*[0-9]+ - .*\((Failed|Timeout|Not Run|SEGFAULT|Subprocess aborted|Exception)' "$tests_log" | head -n 20
  record device-tests FAIL "$(since "$t")" "$d (ctest exit $rc)"
elif on_gpu && ((n_device_skips > 0)); then
  echo "---- device tests skipped with a GPU present:"
  printf '%s\n' "$device_skips" | head -n 20 | sed 's/^/  | /'
  record device-tests FAIL "$(since "$t")" "$d: $n_device_skips device tests skipped with a GPU"
else
  on_gpu || d="$d (no GPU: skips expected)"
  record device-tests PASS "$(since "$t")" "$d"
fi

# ---- models ------------------------------------------------------------------------------------------
t=$(date +%s)
models_log="$logs/models.log"
layers=${LATTE_GPU_CHECK_LAYERS:-4}
tiny="$work/tiny-q4_0.gguf"
v2l="$work/v2-lite-${layers}l-q4_0.gguf"
: >"$models_log"
ok=1
[ -s "$tiny" ] || timeout -k 10 60 "$latte" synth --preset tiny --type q4_0 --no-progress -o "$tiny" >>"$models_log" 2>&1 || ok=0
[ -s "$v2l" ] || timeout -k 10 240 "$latte" synth --preset v2-lite --layers "$layers" --type q4_0 --no-progress -o "$v2l" \
  >>"$models_log" 2>&1 || ok=0
if [ "$ok" = 1 ]; then
  record models PASS "$(since "$t")" "tiny q4_0 $(du -h "$tiny" | cut -f1), v2-lite ${layers} layers q4_0 $(du -h "$v2l" | cut -f1)"
else
  show_tail "$models_log" "models" 10
  record models FAIL "$(since "$t")" "latte synth failed, see $models_log"
fi

# ---- forwards under compute-sanitizer ----------------------------------------------------------------
# The shipped story model (f32, MLA, MoE) through `latte run`, the synthetic tiny Q4_0 (tokenizer
# none: token ids) through `latte eval` as a 40-token prefill and 8 decode steps, all on the GPU
# and then with the routed experts on the CPU (the scheduler's copies).
t=$(date +%s)
san_log="$logs/sanitizer.log"
: >"$san_log"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
ids="$work/ids.txt"
for i in $(seq 1 48); do echo $(((i * 7919) % 5000 + 1)); done >"$ids"
prompt="Once upon a time, there was a little girl who lived in a village near the forest. One day she went out to play with her friend and saw"
errors=0 san_fail="" ran=0
forward() {  # label, latte's arguments
  local what=$1 part="$work/sanitizer-part.log" rc n cmd
  shift
  if on_gpu; then
    cmd=("$sanitizer" --tool memcheck --error-exitcode 86 --print-limit 50 "$latte" "$@")
  else
    cmd=("$latte" "$@")
  fi
  echo "==== ${cmd[*]}" >>"$san_log"
  timeout -k 10 120 "${cmd[@]}" >"$part" 2>&1
  rc=$?
  cat "$part" >>"$san_log"
  ran=$((ran + 1))
  local wrong=()
  if on_gpu; then
    n=$(grep -oE 'ERROR SUMMARY: [0-9]+ error' "$part" | grep -oE '[0-9]+' | tail -n 1)
    if [ -z "$n" ]; then
      wrong+=("no ERROR SUMMARY")
    else
      errors=$((errors + n))
      ((n > 0)) && wrong+=("$n errors")
    fi
    grep -q "running on the CPU" "$part" && wrong+=("ran on the CPU")
  fi
  [ "$rc" -ne 0 ] && [ "$rc" -ne 86 ] && wrong+=("exit $rc")
  if ((${#wrong[@]} > 0)); then
    local joined
    joined=$(printf '%s, ' "${wrong[@]}")
    san_fail+="$what: ${joined%, }; "
  fi
}
if on_gpu && [ ! -x "$sanitizer" ]; then
  record sanitizer FAIL 0 "compute-sanitizer not found (PATH, /usr/local/cuda/bin)"
elif [ ! -s "$tiny" ]; then
  record sanitizer FAIL 0 "not run: no synthetic model"
else
  forward "run story-f32" run -m "$root/models/tiny-mla-stories-f32.gguf" -p "$prompt" -n 8 --seed 1 -ngl 99
  forward "eval tiny-q4_0" eval -m "$tiny" --tokens "$ids" --logits-out "$work/logits.f32" --decode-from 40 -ngl 99
  forward "eval tiny-q4_0 --cpu-moe" eval -m "$tiny" --tokens "$ids" --logits-out "$work/logits-cpu-moe.f32" \
    --decode-from 40 -ngl 99 --cpu-moe
  if [ -n "$san_fail" ]; then
    echo "---- sanitizer: the first of its reports"
    grep -E '^=========' "$san_log" | grep -v 'COMPUTE-SANITIZER' | head -n 30 | sed 's/^/  | /'
    show_tail "$san_log" "sanitizer" 15
    record sanitizer FAIL "$(since "$t")" "${san_fail%; } ($errors errors in all)"
  elif on_gpu; then
    record sanitizer PASS "$(since "$t")" "$ran forwards, 0 errors (memcheck)"
  else
    record sanitizer PASS "$(since "$t")" "$ran forwards on the CPU, no sanitizer (no GPU)"
  fi
fi

# ---- bench -------------------------------------------------------------------------------------------
bench_log="$logs/bench.log"
: >"$bench_log"
# "| model | size | params | backend | threads | test | t/s |" rows -> "ngl 99 pp512 1234.5, ..."
bench_numbers() {
  awk -F'|' '/^\| / && $8 ~ /[0-9]/ {
      b = $5; gsub(/^ +| +$/, "", b); if (match(b, /ngl [0-9a-z]+/)) b = substr(b, RSTART, RLENGTH)
      tst = $7; gsub(/ /, "", tst); ts = $8; sub(/^ +/, "", ts); sub(/ .*/, "", ts)
      out = out (out == "" ? "" : ", ") b " " tst " " ts
    } END { print out }' "$1"
}
bench() {  # name, flags...
  local name=$1 part="$work/bench-part.log" rc rows
  shift
  t=$(date +%s)
  if [ ! -s "$v2l" ]; then
    record "$name" FAIL 0 "not run: no synthetic model"
    return
  fi
  echo "==== latte bench -m ${v2l##*/} $*" | tee -a "$bench_log"
  timeout -k 10 240 "$latte" bench -m "$v2l" "$@" -p 512 -n 128 -r 3 >"$part" 2>&1
  rc=$?
  cat "$part" >>"$bench_log"
  grep -E '^\||note|warning|error' "$part"
  rows=$(grep -cE '^\| .*(pp|tg)[0-9]+' "$part")
  if [ "$rc" -ne 0 ]; then
    record "$name" FAIL "$(since "$t")" "exit $rc: $(grep -m1 -E 'error' "$part")"
  elif on_gpu && ! grep -qE '^\| .*ngl 99' "$part"; then
    record "$name" FAIL "$(since "$t")" "no -ngl 99 row on the GPU: $(bench_numbers "$part")"
  elif ((rows == 0)); then
    record "$name" FAIL "$(since "$t")" "no results"
  else
    record "$name" PASS "$(since "$t")" "$(bench_numbers "$part")"
  fi
}
bench bench-ngl -ngl 0,99
bench bench-cpu-moe -ngl 99 --cpu-moe

summary
