#!/usr/bin/env bash
# Builds the container images into OCI archives, with Debian's buildah and no
# registry:
#   dpu-cni-host  amd64          host-shim, dpu-cni, install-cni   (Containerfile.host)
#   dpu-cni-dpu   amd64, arm64   dpu-dataplane, dpu-agent, dpuctl, dpu-offload-hw-check (Containerfile.dpu)
# The host image and the amd64 DPU runtime are FROM a Debian 12 minbase made
# with debootstrap, their packages installed with apt (Containerfile.host,
# Containerfile.dpu-runtime). The arm64 DPU runtime runs nothing under
# emulation: mmdebstrap extracts the packages images/dpu-packages.txt lists
# (with their dependencies, no maintainer scripts) and build.sh writes what
# those scripts would have (passwd and group with the image's user, the CA
# bundle, dpkg's status). Each rootfs is a tarball cached under the output
# directory with its image in buildah's own vfs store there, so a rebuild only
# copies the binaries in (buildah build --layers caches the apt layers too).
# Running an arm64 image on x86 takes qemu-aarch64-static through
# binfmt_misc, registered here when the kernel has none for aarch64.
#
#   images/build.sh [--image host|dpu]... [--arch amd64|arm64]... [--out DIR]
#                   [--release-dir DIR] [--arm64-dir DIR]
#   images/build.sh --dpu-packages amd64|arm64    (the DPU image's packages for it)
# Defaults: both images, amd64, plus arm64 for the DPU image when the arm64
# tree (build/arm64, `cmake --preset arm64`) holds its binaries; binaries from
# build/release; archives in build/images:
#   dpu-cni-host-VERSION-amd64.oci.tar, dpu-cni-dpu-VERSION-{amd64,arm64}.oci.tar
# each tagged dpu-cni-host:VERSION / dpu-cni-dpu:VERSION inside (podman load -i).
# Labels: org.opencontainers.image.version (project version) and .revision
# (git commit, "-dirty" with uncommitted changes). Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

images=()
archs=()
out=build/images
release_dir=build/release
arm64_dir=build/arm64
mirror=${DPU_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DPU_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}

die() { echo "images/build.sh: $*" >&2; exit 1; }
# The packages images/dpu-packages.txt lists for ARCH, one a line.
dpu_packages() {
  awk -v arch="$1" '!/^[[:space:]]*(#|$)/ {
    ok = NF == 1; for (i = 2; i <= NF; i++) if ($i == arch) ok = 1
    if (ok) print $1 }' images/dpu-packages.txt
}

while [ $# -gt 0 ]; do
  case $1 in
    --image) [ $# -ge 2 ] || die "--image needs host or dpu"; images+=("$2"); shift 2 ;;
    --arch) [ $# -ge 2 ] || die "--arch needs amd64 or arm64"; archs+=("$2"); shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
    --release-dir) [ $# -ge 2 ] || die "--release-dir needs a directory"; release_dir=$2; shift 2 ;;
    --arm64-dir) [ $# -ge 2 ] || die "--arm64-dir needs a directory"; arm64_dir=$2; shift 2 ;;
    --dpu-packages)
      [[ ${2:-} = amd64 || ${2:-} = arm64 ]] || die "--dpu-packages needs amd64 or arm64"
      dpu_packages "$2"; exit 0 ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, mmdebstrap and buildah's chroot isolation need it)"
for i in "${images[@]}"; do [[ $i = host || $i = dpu ]] || die "--image $i: use host or dpu"; done
for a in "${archs[@]}"; do [[ $a = amd64 || $a = arm64 ]] || die "--arch $a: use amd64 or arm64"; done
[ ${#images[@]} -gt 0 ] || images=(host dpu)
mkdir -p "$out"
out=$(realpath "$out")
cache=$out/cache
store=$out/store
mkdir -p "$cache" "$store"

for tool in buildah debootstrap; do
  command -v "$tool" >/dev/null || die "$tool is not installed: run scripts/install-deps.sh"
done
buildah=(buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs)

version=$(sed -nE 's/^project\(dpu-cni VERSION ([0-9.]+).*/\1/p' CMakeLists.txt)
[ -n "$version" ] || die "no project version in CMakeLists.txt"
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$revision" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  revision="$revision-dirty"
fi

# binfmt_misc entry for aarch64 with the F flag: the kernel keeps
# qemu-aarch64-static open, so it also runs inside the image's chroot.
ensure_binfmt_arm64() {
  [ "$(uname -m)" = aarch64 ] && return 0
  local qemu
  qemu=$(command -v qemu-aarch64-static) || die "qemu-aarch64-static is not installed: run scripts/install-arm64-deps.sh"
  [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc ||
    die "cannot mount binfmt_misc: arm64 RUN steps need it"
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] && return 0
  printf '%s' ":qemu-aarch64:M::\\x7f\\x45\\x4c\\x46\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\xb7\\x00:\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x00\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xfe\\xff\\xff\\xff:$qemu:F" \
    > /proc/sys/fs/binfmt_misc/register || die "cannot register qemu-aarch64-static with binfmt_misc"
}

# The Debian 12 minbase of ARCH as an image in our store; prints its name.
base_image() {
  local arch=$1
  local tar=$cache/debian-bookworm-$arch.tar
  if [ ! -s "$tar" ]; then
    local dir
    dir=$(mktemp -d "$cache/rootfs-$arch.XXXXXX")
    echo "images: debootstrap bookworm $arch (cached in $tar)" >&2
    debootstrap --variant=minbase --arch="$arch" bookworm "$dir" "$mirror" >"$cache/debootstrap-$arch.log" 2>&1 || {
      tail -20 "$cache/debootstrap-$arch.log" >&2; rm -rf "$dir"; die "debootstrap $arch failed (log: $cache/debootstrap-$arch.log)"; }
    cat > "$dir/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
EOF
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/var/log/*.log
    tar --numeric-owner --xattrs -C "$dir" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
    rm -rf "$dir"
  fi
  import_rootfs "$arch" "$tar" dpu-cni-base
}

# import_rootfs ARCH TAR NAME: the rootfs tarball as an image of our store,
# named after its content; prints the name.
import_rootfs() {
  local arch=$1 tar=$2 name
  name=localhost/$3:bookworm-$arch-$(sha256sum "$tar" | cut -c1-12)
  if ! "${buildah[@]}" inspect --type image "$name" >/dev/null 2>&1; then
    local ctr
    ctr=$("${buildah[@]}" from --arch "$arch" scratch)
    "${buildah[@]}" add "$ctr" "$tar" / >/dev/null
    "${buildah[@]}" config --arch "$arch" --os linux --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
    "${buildah[@]}" commit --quiet "$ctr" "$name" >/dev/null
    "${buildah[@]}" rm "$ctr" >/dev/null
  fi
  echo "$name"
}

# The DPU image's runtime for ARCH (its packages and its user) as an image of
# our store; prints its name.
dpu_runtime() {
  local arch=$1
  if [ "$arch" = amd64 ]; then
    local ctx=$out/context-dpu-runtime-$arch base name
    rm -rf "$ctx"; mkdir -p "$ctx"
    dpu_packages "$arch" > "$ctx/packages"
    base=$(base_image "$arch")
    name=localhost/dpu-cni-dpu-runtime:bookworm-$arch
    "${buildah[@]}" build --quiet --isolation chroot --layers --arch "$arch" --os linux \
      -f images/Containerfile.dpu-runtime --build-arg "BASE=$base" -t "$name" "$ctx" >/dev/null
    echo "$name"
  else
    dpu_runtime_extract "$arch"
  fi
}

# The arm64 runtime without emulation: mmdebstrap --variant=extract unpacks
# the packages and their dependencies, no maintainer script runs; what theirs
# would have written is written here. The tarball is cached under a key of the
# package list, the mirrors and this function's own text.
dpu_runtime_extract() {
  local arch=$1 pkgs key tar
  command -v mmdebstrap >/dev/null || die "mmdebstrap is not installed: run scripts/install-arm64-deps.sh"
  # What the image needs to run besides the binaries' libraries: a shell,
  # coreutils, ldd (a bash script in libc-bin), the base layout and users.
  pkgs=$( (printf '%s\n' base-files base-passwd bash coreutils dash libc-bin; dpu_packages "$arch") | paste -sd, -)
  key=$( (echo "$pkgs $mirror $security"; declare -f dpu_runtime_extract) | sha256sum | cut -c1-16)
  tar=$cache/dpu-runtime-bookworm-$arch-$key.tar
  if [ ! -s "$tar" ]; then
    local dir log=$cache/mmdebstrap-$arch.log
    rm -f "$cache/dpu-runtime-bookworm-$arch-"*.tar   # those of another package list
    dir=$(mktemp -d "$cache/runtime-$arch.XXXXXX")
    echo "images: mmdebstrap --variant=extract bookworm $arch (cached in $tar)" >&2
    # dpkg's status from the unpacked .debs (scanners and dpkg -l read it);
    # merged /usr as debootstrap makes it. Debian's arm64 ld.so searches
    # /usr/lib/aarch64-linux-gnu without an ld.so.cache, so none is made.
    mmdebstrap --variant=extract --architectures="$arch" --include="$pkgs" \
      --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
      --extract-hook='for d in "$1"/var/cache/apt/archives/*.deb; do
          dpkg-deb -f "$d"; echo "Status: install ok installed"; echo; done > "$1/var/lib/dpkg/status"' \
      bookworm "$dir" "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
      "deb $security bookworm-security main" >"$log" 2>&1 || {
        tail -20 "$log" >&2; rm -rf "$dir"; die "mmdebstrap $arch failed (log: $log)"; }
    # base-passwd's postinst copies its master files; the image's user as
    # Containerfile.dpu-runtime's useradd makes it.
    cp "$dir/usr/share/base-passwd/passwd.master" "$dir/etc/passwd"
    cp "$dir/usr/share/base-passwd/group.master" "$dir/etc/group"
    echo "dpu-cni:x:65532:65532::/nonexistent:/usr/sbin/nologin" >> "$dir/etc/passwd"
    echo "dpu-cni:x:65532:" >> "$dir/etc/group"
    # ca-certificates' postinst (update-ca-certificates) writes the bundle
    # OpenSSL's default paths read.
    cat "$dir"/usr/share/ca-certificates/mozilla/*.crt > "$dir/etc/ssl/certs/ca-certificates.crt"
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/var/log/*.log
    tar --numeric-owner --xattrs -C "$dir" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
    rm -rf "$dir"
  fi
  import_rootfs "$arch" "$tar" dpu-cni-dpu-runtime
}

machine_of() {  # ELF machine of a binary: amd64, arm64 or other
  case $(readelf -h "$1" 2>/dev/null | sed -n 's/^ *Machine: *//p') in
    *X86-64*) echo amd64 ;;
    *AArch64*) echo arm64 ;;
    *) echo other ;;
  esac
}

# stage IMAGE ARCH TREE DIR: the build context (binaries of TREE, the XDP
# objects, scripts and example configs); fails naming what is not built.
stage() {
  local image=$1 arch=$2 tree=$3 ctx=$4 f
  rm -rf "$ctx"
  mkdir -p "$ctx/bin" "$ctx/share/examples"
  local bins=()
  if [ "$image" = host ]; then
    bins=("$tree/host-shim/host-shim" "$tree/cni/dpu-cni")
    mkdir -p "$ctx/libexec"
    install -m 0755 host-shim/tools/install-cni.sh "$ctx/libexec/install-cni"
    cp host-shim/examples/host-shim.yaml "$ctx/share/examples/"
  else
    bins=("$tree/dpu-agent/datapath/dpu-dataplane" "$tree/dpu-agent/control/dpu-agent"
          "$tree/dpu-agent/dpuctl/dpuctl" "$tree/dpu-agent/offload/dpu-offload-hw-check")
    mkdir -p "$ctx/lib"
    for f in overlay_steer representor_redirect; do
      [ -s "$tree/dpu-agent/datapath/$f.bpf.o" ] || die "$tree/dpu-agent/datapath/$f.bpf.o is not built"
      cp "$tree/dpu-agent/datapath/$f.bpf.o" "$ctx/lib/"
    done
    cp dpu-agent/control/examples/agent.yaml dpu-agent/control/examples/cluster.yaml "$ctx/share/examples/"
    cp dpu-agent/datapath/dataplane_bluefield.yaml dpu-agent/datapath/dataplane_lab.yaml "$ctx/share/examples/"
  fi
  for f in "${bins[@]}"; do
    [ -x "$f" ] || die "$f is not built (cmake --build $tree)"
    [ "$(machine_of "$f")" = "$arch" ] || die "$f is not an $arch binary"
    install -m 0755 "$f" "$ctx/bin/"
  done
}

build_one() {
  local image=$1 arch=$2 tree=$3
  [ "$arch" = amd64 ] || ensure_binfmt_arm64
  local ctx=$out/context-$image-$arch base tag archive
  stage "$image" "$arch" "$tree" "$ctx"
  local base_name="debian:bookworm (debootstrap minbase)"
  if [ "$image" = dpu ]; then
    base=$(dpu_runtime "$arch")
    [ "$arch" = amd64 ] || base_name="debian:bookworm (mmdebstrap extract of images/dpu-packages.txt)"
  else
    base=$(base_image "$arch")
  fi
  tag=localhost/dpu-cni-$image:$version-$arch
  archive=$out/dpu-cni-$image-$version-$arch.oci.tar
  echo "images: building dpu-cni-$image:$version for $arch (revision $revision)"
  "${buildah[@]}" build --quiet --isolation chroot --layers --arch "$arch" --os linux \
    -f "images/Containerfile.$image" --build-arg "BASE=$base" \
    --label "org.opencontainers.image.version=$version" --label "org.opencontainers.image.revision=$revision" \
    --label "org.opencontainers.image.base.name=$base_name" -t "$tag" "$ctx" >/dev/null
  rm -f "$archive"
  "${buildah[@]}" push --quiet "$tag" "oci-archive:$archive:dpu-cni-$image:$version"
  echo "images: $archive ($(du -h "$archive" | cut -f1))"
}

for image in "${images[@]}"; do
  want=("${archs[@]}")
  if [ ${#want[@]} -eq 0 ]; then
    want=(amd64)
    [ "$image" = dpu ] && [ -x "$arm64_dir/dpu-agent/datapath/dpu-dataplane" ] && want+=(arm64)
  fi
  for arch in "${want[@]}"; do
    if [ "$image" = host ] && [ "$arch" = arm64 ]; then die "the host image is amd64 only (the hosts are x86 servers)"; fi
    tree=$release_dir
    [ "$arch" = arm64 ] && tree=$arm64_dir
    build_one "$image" "$arch" "$tree"
  done
done
# Containers buildah left (an interrupted build) and dangling layers go.
"${buildah[@]}" rm --all >/dev/null 2>&1 || true
