#!/bin/bash
# A fake SR-IOV PF for tests and the lab: each "VF" is one end of a veth pair,
# described by a sysfs-shaped tree that host-shim reads exactly as it reads /sys
# (host-shim/include/host-shim/vf_inventory.h):
#   <root>/class/net/<pf>/device/sriov_numvfs            N
#   <root>/class/net/<pf>/device/virtfn<i> -> <root>/bus/pci/devices/0000:3b:DD.F
#   <root>/bus/pci/devices/0000:3b:DD.F/net/<vf netdev>/
# VF i has PCI address 0000:3b:DD.F with DD.F = i+2 split into device and
# function (VF 0 is 0000:3b:00.2, VF 5 is 0000:3b:00.7, VF 6 is 0000:3b:01.0).
# The VF end is named <prefix>v<i>; its peer, the representor, pf0vf<i> (as an
# mlx5 DPU names it) stays in the same netns, up, so the VF has a carrier.
#
#   source tests/fakes/fake-sysfs.bash
#   fake_sysfs_create  ROOT PF NUMVFS PREFIX [NETNS]   # veths in NETNS (default: current)
#   fake_sysfs_vf_name PREFIX I                        # -> <prefix>v<i>
#   fake_sysfs_vf_pci  I                               # -> 0000:3b:00.2 ...
#   fake_sysfs_repair  ROOT PF NUMVFS PREFIX [NETNS]   # recreate VF veths that vanished
#   fake_sysfs_destroy ROOT PF NUMVFS PREFIX [NETNS]   # the inverse of create
# A veth pair dies with the pod netns it was moved into (a real VF returns to
# the host instead); fake_sysfs_repair puts such VFs back (a VF whose
# representor still exists is alive somewhere and is left alone).

fake_sysfs_vf_name() { echo "${1}v${2}"; }

fake_sysfs_vf_pci() {
  local n=$(( $1 + 2 ))
  printf '0000:3b:%02x.%x\n' $(( n >> 3 )) $(( n & 7 ))
}

_fake_sysfs_ip() {
  local ns=$1; shift
  if [ -n "$ns" ]; then ip -n "$ns" "$@"; else ip "$@"; fi
}

_fake_sysfs_make_veth() {
  local ns=$1 vf=$2 rep=$3
  _fake_sysfs_ip "$ns" link del "$vf" 2>/dev/null
  _fake_sysfs_ip "$ns" link del "$rep" 2>/dev/null
  _fake_sysfs_ip "$ns" link add "$vf" type veth peer name "$rep" || return 1
  _fake_sysfs_ip "$ns" link set "$rep" up || return 1
}

fake_sysfs_create() {
  local root=$1 pf=$2 num=$3 prefix=$4 ns=${5:-}
  if [ -z "$root" ] || [ -z "$pf" ] || [ -z "$num" ] || [ -z "$prefix" ]; then
    echo "usage: fake_sysfs_create ROOT PF NUMVFS PREFIX [NETNS]" >&2; return 2
  fi
  if [ $(( ${#prefix} + 1 + ${#num} )) -gt 15 ]; then
    echo "fake_sysfs_create: prefix '$prefix' makes VF names over 15 characters" >&2; return 2
  fi
  local dev="$root/class/net/$pf/device"
  mkdir -p "$dev" "$root/bus/pci/devices" || return 1
  echo "$num" > "$dev/sriov_numvfs"
  # One ip(8) run for every veth (a node of 110 VFs would otherwise fork ip
  # four times per VF), one mkdir for the tree, no subshell per VF.
  local i n batch="" dirs=() pcis=()
  for (( i = 0; i < num; i++ )); do
    n=$(( i + 2 ))
    printf -v "pcis[$i]" '0000:3b:%02x.%x' $(( n >> 3 )) $(( n & 7 ))
    batch+="link del ${prefix}v$i"$'\n'"link del pf0vf$i"$'\n'"link add ${prefix}v$i type veth peer name pf0vf$i"$'\n'"link set pf0vf$i up"$'\n'
    dirs+=("$root/bus/pci/devices/${pcis[$i]}/net/${prefix}v$i")
  done
  # -force: go on past the deletes of what does not exist; then check each veth.
  _fake_sysfs_ip "$ns" -force -batch - <<<"$batch" 2>/dev/null
  local -A have=()
  local name
  while read -r name; do have[$name]=1; done < <(_fake_sysfs_ip "$ns" -o link show | awk -F': ' '{split($2, a, "@"); print a[1]}')
  mkdir -p "${dirs[@]}" || return 1
  for (( i = 0; i < num; i++ )); do
    [ -n "${have[${prefix}v$i]:-}" ] && [ -n "${have[pf0vf$i]:-}" ] ||
      { echo "fake_sysfs_create: cannot create veth ${prefix}v$i" >&2; return 1; }
    ln -sfn "$root/bus/pci/devices/${pcis[$i]}" "$dev/virtfn$i"
  done
}

fake_sysfs_repair() {
  local root=$1 pf=$2 num=$3 prefix=$4 ns=${5:-}
  local i
  for (( i = 0; i < num; i++ )); do
    local vf
    vf=$(fake_sysfs_vf_name "$prefix" "$i")
    _fake_sysfs_ip "$ns" link show "$vf" >/dev/null 2>&1 && continue
    # The VF is not here under its name: either its pair is going away with a
    # deleted netns (the kernel cleans up namespaces asynchronously: wait for
    # the representor to vanish), or it is alive elsewhere (in a pod, or renamed)
    # and its representor stays: then leave it alone.
    local tries=0
    while _fake_sysfs_ip "$ns" link show "pf0vf$i" >/dev/null 2>&1 && [ $tries -lt 40 ]; do
      sleep 0.05; tries=$(( tries + 1 ))
    done
    _fake_sysfs_ip "$ns" link show "pf0vf$i" >/dev/null 2>&1 && continue
    _fake_sysfs_make_veth "$ns" "$vf" "pf0vf$i" || return 1
  done
}

fake_sysfs_destroy() {
  local root=$1 pf=$2 num=$3 prefix=$4 ns=${5:-}
  local i batch=""
  for (( i = 0; i < num; i++ )); do batch+="link del ${prefix}v$i"$'\n'"link del pf0vf$i"$'\n'; done
  _fake_sysfs_ip "$ns" -force -batch - <<<"$batch" >/dev/null 2>&1
  if [ -n "$root" ] && [ -d "$root/class/net/$pf" ]; then
    rm -rf "$root/class" "$root/bus"
    rmdir "$root" 2>/dev/null
  fi
  return 0
}
