#!/usr/bin/env bash
# podman 4.3 with its CNI backend runs a container from a local busybox rootfs
# on a dpu-cni network: podman calls VERSION, then ADD through dpu-cni →
# host-shim → fake DPU; the container sees its VF as eth0 with the address the
# DPU assigned; `podman rm` runs DEL and everything is released. A network with
# a bad config fails `podman run` with dpu-cni's message and leaves nothing.
# podman runs in the host netns through `nsenter --net` (not `ip netns exec`,
# which would remount /sys under podman).
source "$(dirname "$0")/common.bash"
BUSYBOX=${BUSYBOX:-/bin/busybox}
command -v podman >/dev/null || { echo "FAIL: podman is not installed" >&2; exit 1; }
[ -x "$BUSYBOX" ] || { echo "FAIL: $BUSYBOX missing: install busybox-static" >&2; exit 1; }
cni_env_up

# A tiny rootfs: a static busybox and the files podman bind-mounts over.
root=$CNI_DIR/rootfs
mkdir -p "$root"/{bin,proc,sys,dev,etc,tmp,run}
cp "$BUSYBOX" "$root/bin/busybox"
for a in sh ip sleep cat; do ln -s busybox "$root/bin/$a"; done
touch "$root/etc/resolv.conf" "$root/etc/hosts" "$root/etc/hostname"

mkdir -p "$CNI_DIR/podman-cni"
echo "{\"cniVersion\":\"1.0.0\",\"name\":\"dpunet\",\"plugins\":[$(dpu_plugin_json)]}" > "$CNI_DIR/podman-cni/dpunet.conflist"
echo "{\"cniVersion\":\"1.0.0\",\"name\":\"dpubad\",\"plugins\":[$(dpu_plugin_json '"mtu":"jumbo"')]}" \
  > "$CNI_DIR/podman-cni/dpubad.conflist"
cat > "$CNI_DIR/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[network]
network_backend = "cni"
cni_plugin_dirs = ["$CNI_DIR/plugins", "/usr/lib/cni"]
network_config_dir = "$CNI_DIR/podman-cni"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$CNI_DIR/podman-events.log"
CONF

pm() {
  nsenter --net="/run/netns/$HOST_NETNS" env CONTAINERS_CONF="$CNI_DIR/containers.conf" \
    podman --root "$CNI_DIR/storage" --runroot "$CNI_DIR/runroot" --tmpdir "$CNI_DIR/podman-tmp" "$@"
}
name="dpucni-$$"
cleanup_podman() { pm rm -f -t 0 "$name" >/dev/null 2>&1; pm rm -f -t 0 "$name-bad" >/dev/null 2>&1; }
trap 'cleanup_podman; cni_env_down' EXIT

if out=$(pm run -d --name "$name" --network dpunet --rootfs "$root" /bin/sleep 120 2>&1); then
  pass "podman run on the dpu-cni network"
else
  fail "podman run: $out"; finish
fi
dpu_ip=$(hostshim_list_dpu_attachments | awk '/^POD / {print $4; exit}')
seen=$(pm exec "$name" /bin/ip -o -4 addr show dev eth0 2>&1)
if [ -n "$dpu_ip" ] && echo "$seen" | matches "inet ${dpu_ip%/*}/"; then
  pass "the container sees its VF as eth0 with $dpu_ip"; else fail "container eth0: '$seen', DPU says '$dpu_ip'"; fi
route=$(pm exec "$name" /bin/ip route show default 2>&1)
echo "$route" | matches "default via" && pass "default route: $route" || fail "container route: $route"
vf_in_use=$(hostshim_list_vfs | awk '$3 == "missing" {print $2}' | head -1)
[ -n "$vf_in_use" ] && pass "VF $vf_in_use left the host netns for the container" || fail "no VF moved"
hostshim_list_records | matches . && pass "allocation record written" || fail "no allocation record"

if pm rm -f -t 0 "$name" >/dev/null 2>&1; then pass "podman rm"; else fail "podman rm"; fi
expect_clean "after podman rm"

# A bad network config: podman run fails with dpu-cni's message, nothing is left.
out=$(pm run --rm --name "$name-bad" --network dpubad --rootfs "$root" /bin/true 2>&1)
if [ $? != 0 ] && echo "$out" | matches "mtu"; then pass "bad config refused through podman: $(echo "$out" | tail -n 1)"; else
  fail "podman run on a bad network: $out"; fi
expect_clean "after the refused podman run"

finish
