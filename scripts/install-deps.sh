#!/usr/bin/env bash
# Installs the Debian 12 packages latte builds against, but only when something is missing,
# so `make` on a prepared machine stays quiet and offline.
# ccache is the compiler launcher when present (CMakeLists.txt), so a second build tree reuses
# what the first compiled.
# With --aarch64, also what the aarch64 cross build (cmake/aarch64-linux-gnu.cmake) needs: the
# cross compiler, and the arm64 libraries as multiarch packages (dpkg --add-architecture arm64),
# which qemu-aarch64 (qemu-user) runs the tests with.
# With --web-tests, also Node.js, npm and Chromium, which the server's real-client tests run
# (tests/src/server/js/: OpenAI's Node SDK, the chat page in headless Chromium).
set -euo pipefail
packages=(cmake g++ make ninja-build pkg-config ccache qemu-user libomp-dev libxsimd-dev xtl-dev nlohmann-json3-dev
          libcli11-dev libfmt-dev libpcre2-dev libedit-dev libcpp-httplib-dev libgtest-dev libgmock-dev
          libopenmpi-dev openmpi-bin)
aarch64=0
cuda=0
web_tests=0
for option in "$@"; do
  case "$option" in
    --aarch64)
      aarch64=1
      # Header-only arch:all packages (xtl, nlohmann-json, CLI11) serve both architectures.
      # libcpp-httplib-dev:arm64 brings the arm64 OpenSSL, zlib and Brotli it links (latte serve).
      packages+=(g++-aarch64-linux-gnu libc6:arm64 libstdc++6:arm64 libgomp1:arm64 libxsimd-dev:arm64 libfmt-dev:arm64
                 libpcre2-dev:arm64 libedit-dev:arm64 libcpp-httplib-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64) ;;
    --cuda) cuda=1 ;;
    # clang and its sanitizer and libFuzzer runtimes: the ASan+UBSan build and the fuzzer (.ci/run).
    --sanitize) packages+=(clang libclang-rt-14-dev) ;;
    # clang-format, which CI checks the layout of the C++ files with (.clang-format).
    --lint) packages+=(clang-format) ;;
    --web-tests) web_tests=1 ;;
    *) echo "install-deps.sh: unknown option '$option' (the options are --aarch64, --cuda, --sanitize, --lint and --web-tests)" >&2; exit 2 ;;
  esac
done
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
# ---- --cuda (issue 14): a CUDA toolkit for -DLATTE_CUDA=ON, only where none is installed ----
# Debian's nvidia-cuda-toolkit (11.8, in the non-free component, which this enables) and
# clang-14: that nvcc rejects Debian 12's GCC 12, so CMake needs -DCMAKE_CUDA_HOST_COMPILER=clang++-14.
if [ "$cuda" = 1 ] && ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  # The component as a whole word on a line that is not a comment: Debian 12's stock sources name
  # non-free-firmware, which does not hold the toolkit.
  if ! grep -rqsE '^[^#]*[[:space:]:]non-free([[:space:]]|$)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
      $sudo tee /etc/apt/sources.list.d/latte-non-free.sources >/dev/null
  fi
  echo "installing nvidia-cuda-toolkit and clang-14 for the CUDA backend" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nvidia-cuda-toolkit clang-14 >/dev/null
fi
# ---- end --cuda ----
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# --web-tests: the tools are looked for as commands, not packages, since a Node.js from elsewhere
# serves as well (NodeSource's nodejs package has npm inside, and conflicts with Debian's npm).
if [ "$web_tests" = 1 ]; then
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing missing packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if [ $aarch64 -eq 1 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $sudo dpkg --add-architecture arm64
fi
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
