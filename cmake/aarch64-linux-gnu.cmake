# Cross build for the DPU's Arm cores (BlueField: aarch64, Debian 12) from an
# amd64 machine: Debian's cross compiler (crossbuild-essential-arm64) against
# an arm64 sysroot of Debian's -dev packages (scripts/install-arm64-deps.sh).
# Test binaries run under qemu-aarch64-static with that sysroot as their root
# for libraries, so ctest works unchanged (CMAKE_CROSSCOMPILING_EMULATOR).
#
#   cmake --preset arm64          (sysroot: build/sysroot-arm64, or -DDPU_ARM64_SYSROOT=...)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

if(NOT DPU_ARM64_SYSROOT)
  if(DEFINED ENV{DPU_ARM64_SYSROOT})
    set(DPU_ARM64_SYSROOT $ENV{DPU_ARM64_SYSROOT})
  else()
    get_filename_component(DPU_ARM64_SYSROOT "${CMAKE_CURRENT_LIST_DIR}/../build/sysroot-arm64" ABSOLUTE)
  endif()
endif()
set(DPU_ARM64_SYSROOT "${DPU_ARM64_SYSROOT}" CACHE PATH "arm64 sysroot (scripts/install-arm64-deps.sh)")
if(NOT EXISTS "${DPU_ARM64_SYSROOT}/.dpu-sysroot")
  message(FATAL_ERROR "no arm64 sysroot at ${DPU_ARM64_SYSROOT}: run scripts/install-arm64-deps.sh")
endif()

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_SYSROOT "${DPU_ARM64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH "${DPU_ARM64_SYSROOT}")
# Programs (protoc, clang for the BPF objects, python) are the build machine's;
# libraries, headers and CMake packages come from the sysroot only.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config: the sysroot's .pc files, with their paths prefixed by it.
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${DPU_ARM64_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR}
    "${DPU_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${DPU_ARM64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# The sysroot's protobuf CMake package names the sysroot's protoc (an arm64
# binary): generate code with the build machine's protoc of the same version.
find_program(DPU_HOST_PROTOC protoc PATHS /usr/bin NO_DEFAULT_PATH REQUIRED)
set(Protobuf_PROTOC_EXECUTABLE "${DPU_HOST_PROTOC}" CACHE FILEPATH "protoc of the build machine")

find_program(DPU_QEMU_AARCH64 qemu-aarch64-static REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR "${DPU_QEMU_AARCH64};-L;${DPU_ARM64_SYSROOT}")
