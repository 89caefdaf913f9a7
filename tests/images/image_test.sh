#!/usr/bin/env bash
# The container images, as a runtime sees them: images/build.sh builds them
# (reusing its cache), podman loads each OCI archive into a store of its own
# and runs the binaries inside — dpu-cni VERSION and host-shim --check-config
# in the host image, the installer writing a plugin and a conflist into
# mounted host directories (and refusing a broken conflist); in the DPU image
# dpu-agent --check-config, dpu-dataplane --check-config on the shipped configs,
# dpuctl, and the EAL with its PMDs coming up (dpu-offload-hw-check on
# net_null/net_ring); every binary's libraries resolve, labels carry version
# and revision, the images' default user is not root, and every path
# images/contents.txt lists is there.
#   image_test.sh SOURCE_DIR IMAGES_DIR              the host and DPU images, amd64
#   image_test.sh SOURCE_DIR IMAGES_DIR ARM64_TREE   the arm64 DPU image of the arm64
#                                                    build tree, run under qemu
set -uo pipefail
src=$1
images_dir=$2
arm64_tree=${3:-}
if [ "$(id -u)" != 0 ]; then echo "SKIP: $(basename "$0") needs root (buildah, podman)"; exit 77; fi
tools=(buildah podman jq openssl)
if [ -n "$arm64_tree" ]; then tools+=(mmdebstrap qemu-aarch64-static); else tools+=(debootstrap); fi
for t in "${tools[@]}"; do
  command -v "$t" >/dev/null ||
    { echo "SKIP: $t is not installed (scripts/install-deps.sh, scripts/install-arm64-deps.sh)"; exit 77; }
done
if [ -n "$arm64_tree" ] && [ ! -x "$arm64_tree/dpu-agent/datapath/dpu-dataplane" ]; then
  echo "SKIP: $arm64_tree holds no arm64 build (cmake --preset arm64 && cmake --build --preset arm64" \
       "--target dpu-dataplane dpu-agent dpuctl dpu-offload-hw-check)"
  exit 77
fi
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$(( FAILURES + 1 )); }
pass() { echo "ok: $*"; }

rm -f "$images_dir"/*.oci.tar
if [ -n "$arm64_tree" ]; then
  # The arm64 runtime is extracted, not installed: nothing runs under qemu
  # until the checks below.
  host_archs=() dpu_archs=(arm64)
  bash "$src/images/build.sh" --out "$images_dir" --image dpu --arch arm64 --arm64-dir "$arm64_tree" ||
    { echo "FAIL: images/build.sh --arch arm64 failed" >&2; exit 1; }
else
  host_archs=(amd64) dpu_archs=(amd64)
  bash "$src/images/build.sh" --out "$images_dir" --image host --image dpu --arch amd64 ||
    { echo "FAIL: images/build.sh failed" >&2; exit 1; }
fi
version=$(sed -nE 's/^project\(dpu-cni VERSION ([0-9.]+).*/\1/p' "$src/CMakeLists.txt")
revision=$(git -C "$src" rev-parse HEAD)

work=$(mktemp -d /tmp/dpu-image-test.XXXXXX)
# A store of its own (overlay: a vfs store copies the whole image per container).
podman=(podman --root "$work/root" --runroot "$work/run" --storage-driver overlay --cgroup-manager cgroupfs
        --events-backend file)
cleanup() {
  "${podman[@]}" rm --all --force >/dev/null 2>&1
  "${podman[@]}" rmi --all --force >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
# run ARCH IMAGE [podman run options --] CMD...: the command's output; its status is run's.
run() {
  local arch=$1 image=$2; shift 2
  local opts=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  # podman's default ulimits exceed what this machine's hard limits let runc set.
  "${podman[@]}" run --rm --network none --arch "$arch" --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
    "${opts[@]}" "$image" "$@" 2>&1
}

declare -A loaded  # image name -> "ARCH ID" of the one this run tested
load() {  # load ARCHIVE: the loaded image's id (both DPU archives carry the same tag)
  local name
  name=$("${podman[@]}" load --quiet -i "$1" | sed -nE 's/^Loaded image(\(s\))?: *//p' | tail -1)
  [ -n "$name" ] && "${podman[@]}" image inspect --format '{{.Id}}' "$name"
}

check_common() {  # check_common ARCH IMAGE NAME BINARY...
  local arch=$1 image=$2 name=$3; shift 3
  local labels
  labels=$("${podman[@]}" image inspect --format '{{json .Labels}}' "$image")
  [ "$(jq -r '."org.opencontainers.image.version"' <<< "$labels")" = "$version" ] &&
    [[ "$(jq -r '."org.opencontainers.image.revision"' <<< "$labels")" == "$revision"* ]] &&
    pass "$name ($arch): labels version $version, revision ${revision:0:12}" ||
    fail "$name ($arch): labels $labels"
  local got
  got=$("${podman[@]}" image inspect --format '{{.Architecture}}' "$image")
  [ "$got" = "$arch" ] && pass "$name: architecture $arch" || fail "$name: architecture is $got, not $arch"
  # The uid has its passwd entry (the arm64 runtime writes it without useradd).
  got=$(run "$arch" "$image" -- sh -c 'echo "$(id -u) $(id -un)"')
  [ "$got" = "65532 dpu-cni" ] && pass "$name ($arch): default user 65532 (dpu-cni), not root" ||
    fail "$name ($arch): default user '$got'"
  # One container for every binary's ldd: each must list libc and nothing "not found".
  local out
  out=$(run "$arch" "$image" -- sh -c 'for b; do echo "== $b"; ldd "$b" 2>&1; done' sh "$@")
  if [ "$(grep -c 'libc.so.6 =>' <<< "$out")" -eq $# ] && ! grep -q 'not found' <<< "$out"; then
    pass "$name ($arch): the libraries of $# binaries resolve"
  else
    fail "$name ($arch): unresolved libraries: $(grep -E '^==|not found|rror' <<< "$out" | tr '\n' ' ')"
  fi
}

# ---- host image ----
archive=$images_dir/dpu-cni-host-$version-amd64.oci.tar
if [ ${#host_archs[@]} -eq 0 ]; then
  :
elif [ -s "$archive" ]; then
  img=$(load "$archive")
  [ -n "$img" ] || fail "podman could not load $archive"
  loaded[dpu-cni-host]="amd64 $img"
  check_common amd64 "$img" dpu-cni-host /usr/bin/host-shim /usr/bin/dpu-cni
  out=$(run amd64 "$img" -i -e CNI_COMMAND=VERSION -- /usr/bin/dpu-cni < /dev/null)
  jq -e '.cniVersion and (.supportedVersions | index("1.1.0")) and (.supportedVersions | index("0.4.0"))' \
    <<< "$out" >/dev/null 2>&1 && pass "dpu-cni VERSION in the image: $(jq -c .supportedVersions <<< "$out")" ||
    fail "dpu-cni VERSION in the image: $out"
  # The example names its TLS files where a host keeps them: a node's own
  # (made here with openssl) are mounted there, readable by the image's user.
  tls=$work/tls
  mkdir -p "$tls"
  if (cd "$tls" &&
      openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=image-test-ca \
        -keyout ca.key -out ca.pem &&
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=node-a \
        -keyout host.key -out host.csr &&
      openssl x509 -req -in host.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -out host.pem &&
      chmod 0644 ./*) >/dev/null 2>&1; then
    out=$(run amd64 "$img" -v "$tls:/etc/dpu-cni/tls:ro" -- \
            /usr/bin/host-shim --config /usr/share/dpu-cni/examples/host-shim.yaml --check-config)
  else
    out="openssl could not make the test certificates"
  fi
  [[ "$out" == *": OK"* ]] && pass "host-shim --check-config on the shipped example: $out" || fail "host-shim --check-config: $out"
  out=$(run amd64 "$img" -- /usr/bin/host-shim --version)
  [ "$out" = "host-shim $version" ] && pass "host-shim --version: $out" || fail "host-shim --version: $out"
  # The installer, as the host DaemonSet's init container runs it (root, host dirs mounted).
  mkdir -p "$work/host/bin" "$work/host/net.d"
  echo '{"cniVersion": "1.0.0", "name": "dpunet", "plugins": [{"type": "dpu-cni", "socket": "/run/dpu-cni/host-shim.sock"}]}' \
    > "$work/host/good.conflist"
  echo '{"cniVersion": "1.0.0", "name": "dpunet", "plugins": [{"type": "bridge"}]}' > "$work/host/bad.conflist"
  mounts=(--user 0 -v "$work/host/bin:/host/opt/cni/bin" -v "$work/host/net.d:/host/etc/cni/net.d" -v "$work/host:/cfg:ro")
  install=(/usr/libexec/dpu-cni/install-cni install --plugin /usr/bin/dpu-cni --bin-dir /host/opt/cni/bin
           --conf-dir /host/etc/cni/net.d --socket /run/dpu-cni/host-shim.sock --timeout 1)
  out=$(run amd64 "$img" "${mounts[@]}" -- "${install[@]}" --conflist /cfg/bad.conflist 2>&1)
  rc=$?
  [ "$rc" -ne 0 ] && [ -z "$(find "$work/host/bin" "$work/host/net.d" -mindepth 1)" ] &&
    pass "install-cni refuses a conflist without dpu-cni and writes nothing: $out" ||
    fail "install-cni accepted a conflist without dpu-cni (rc $rc): $out"
  # No host-shim answers in this container: the plugin lands, the conflist must not (the node
  # declares its network only once an ADD can be served).
  out=$(run amd64 "$img" "${mounts[@]}" -- "${install[@]}" --conflist /cfg/good.conflist --conflist-name 10-dpu-cni.conflist 2>&1)
  rc=$?
  if [ "$rc" -ne 0 ] && cmp -s "$work/host/bin/dpu-cni" <(run amd64 "$img" -- cat /usr/bin/dpu-cni) &&
     [ -x "$work/host/bin/dpu-cni" ] && [ ! -e "$work/host/net.d/10-dpu-cni.conflist" ] &&
     [ -z "$(find "$work/host" -name '.*tmp*')" ]; then
    pass "install-cni put dpu-cni on the host and, with no host-shim answering, no conflist; no temporary file: $out"
  else
    fail "install-cni: $out; host dirs: $(ls -la "$work/host/bin" "$work/host/net.d" | tr '\n' ' ')"
  fi
  # The plugin copied to the host runs there.
  out=$(CNI_COMMAND=VERSION "$work/host/bin/dpu-cni" < /dev/null)
  jq -e .cniVersion <<< "$out" >/dev/null 2>&1 && pass "the installed dpu-cni runs on the host" ||
    fail "the installed dpu-cni on the host: $out"
else
  fail "no host image archive $archive"
fi

# ---- DPU image(s) ----
for arch in "${dpu_archs[@]}"; do
  archive=$images_dir/dpu-cni-dpu-$version-$arch.oci.tar
  [ -s "$archive" ] || { fail "no DPU image archive $archive"; continue; }
  img=$(load "$archive")
  [ -n "$img" ] || { fail "podman could not load $archive"; continue; }
  loaded[dpu-cni-dpu]="$arch $img"
  check_common "$arch" "$img" "dpu-cni-dpu" /usr/bin/dpu-dataplane /usr/bin/dpu-agent /usr/bin/dpuctl \
    /usr/bin/dpu-offload-hw-check
  out=$(run "$arch" "$img" -- /usr/bin/dpu-agent --config /usr/share/dpu-cni/examples/agent.yaml --check-config)
  [[ "$out" == "configuration OK"* ]] && pass "dpu-agent --check-config ($arch): $out" || fail "dpu-agent --check-config ($arch): $out"
  for cfg in dataplane_bluefield dataplane_lab; do
    # As the DaemonSet runs it: root (the BlueField config opens its log file in /var/log).
    out=$(run "$arch" "$img" --user 0 -- /usr/bin/dpu-dataplane --config /usr/share/dpu-cni/examples/$cfg.yaml --check-config)
    [[ "$out" == *": OK" ]] && pass "dpu-dataplane --check-config $cfg.yaml ($arch)" || fail "dpu-dataplane --check-config $cfg.yaml ($arch): $out"
  done
  for b in dpu-dataplane dpu-agent dpuctl; do
    out=$(run "$arch" "$img" -- /usr/bin/$b --version)
    [ "$out" = "$b $version" ] && pass "$b --version ($arch): $out" || fail "$b --version ($arch): $out"
  done
  # The runtime's packages as dpkg knows them (what an image scanner reads; the
  # arm64 status is written from the extracted .debs) and the CA bundle.
  mapfile -t pkgs < <(bash "$src/images/build.sh" --dpu-packages "$arch")
  out=$(run "$arch" "$img" -- sh -c 'dpkg-query -W -f "\${Status} \${Package}\n" "$@"
          [ -s /etc/ssl/certs/ca-certificates.crt ] || echo "no CA bundle"' sh "${pkgs[@]}" |
        grep -v '^install ok installed ')
  [ ${#pkgs[@]} -gt 0 ] && [ -z "$out" ] &&
    pass "dpkg lists the ${#pkgs[@]} packages of images/dpu-packages.txt installed, CA bundle there ($arch)" ||
    fail "the DPU runtime ($arch): $out"
  out=$(run "$arch" "$img" -- ls /usr/lib/dpu-cni)
  [[ "$out" == *overlay_steer.bpf.o* && "$out" == *representor_redirect.bpf.o* ]] &&
    pass "the XDP programs are in /usr/lib/dpu-cni ($arch)" || fail "XDP programs ($arch): $out"
  # The EAL and the PMD plugin directory load inside the image.
  out=$(run "$arch" "$img" --user 0 -- /usr/bin/dpu-offload-hw-check --rate-flows 10 -- --no-huge --no-pci -m 256 \
        --no-shconf --file-prefix hwcheck --no-telemetry --log-level '*:error' --vdev=net_null0 --vdev=net_ring0 \
        --vdev=net_ring1)
  grep -q "^summary: 9 kinds: 0 offloaded, 7 refused by the device, 2 software by design" <<< "$out" &&
    pass "dpu-offload-hw-check runs the EAL and its PMDs in the image ($arch)" ||
    fail "dpu-offload-hw-check in the image ($arch): $(tail -5 <<< "$out" | tr '\n' ' ')"
done

contents=$src/images/contents.txt
tested=(dpu-cni-dpu)
[ ${#host_archs[@]} -eq 0 ] || tested=(dpu-cni-host dpu-cni-dpu)
for image in "${tested[@]}"; do
  paths=$(awk -v i="$image" '$1 == i {print $2}' "$contents")
  [ -n "$paths" ] || { fail "images/contents.txt lists nothing for $image"; continue; }
  [ -n "${loaded[$image]:-}" ] || { fail "$image was not loaded"; continue; }
  read -r arch img <<< "${loaded[$image]}"
  # shellcheck disable=SC2086
  out=$(run "$arch" "$img" -- sh -c 'for p; do [ -e "$p" ] || echo "missing $p"; done' sh $paths)
  [ -z "$out" ] && pass "every path images/contents.txt lists for $image ($arch) is in it" ||
    fail "images/contents.txt vs $image ($arch): $out"
done

[ "$FAILURES" -eq 0 ] || { echo "$FAILURES failure(s)" >&2; exit 1; }
echo PASS
