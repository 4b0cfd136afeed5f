# Cross build for 64-bit ARM Linux on a Debian machine (scripts/install-deps.sh --aarch64 installs
# the cross compiler, qemu-user and the arm64 libraries as multiarch packages):
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# The libraries come from Debian's multiarch directories (/usr/lib/aarch64-linux-gnu), which CMake
# searches by itself once it knows the target's library architecture. Test binaries run under
# qemu-aarch64 (CTest and gtest_discover_tests use the emulator). They load the arm64 C library of
# the multiarch packages (/lib/ld-linux-aarch64.so.1, libc6:arm64), not the cross compiler's copy
# under /usr/aarch64-linux-gnu: `-L /usr/aarch64-linux-gnu` would pair that copy's loader with
# the multiarch libc.so.6 the loader finds, two builds of glibc that hang at the first thread.
# LATTE_QEMU_CPU picks the emulated CPU (max: ARMv8.x with dotprod; cortex-a53: without).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(LATTE_QEMU_CPU max CACHE STRING "CPU that qemu-aarch64 emulates for the tests (qemu-aarch64 -cpu help)")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -cpu ${LATTE_QEMU_CPU})

# pkg-config must read the arm64 .pc files, never the build machine's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
