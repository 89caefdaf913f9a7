#!/usr/bin/env bash
# The manifests' offline checks (ctest deploy_manifests): installs the pinned
# npm packages into tests/deploy/node_modules when missing (CI starts clean),
# then runs check-manifests.js. Root: the --check-config runs use a private
# mount namespace.
#   bash tests/deploy/run-checks.sh SOURCE_DIR BUILD_DIR [check-manifests|mutations|node-name|host-install|kube-fields]
set -euo pipefail
src=$1 build=$2 what=${3:-check-manifests}
here=$src/tests/deploy
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "FAIL: node and npm are not installed (scripts/install-deps.sh)"; exit 1; }
command -v kubectl >/dev/null || { echo "FAIL: kubectl is not installed"; exit 1; }
# Installed once per lock file (a stamp of the lock it was installed from).
if ! cmp -s "$here/package-lock.json" "$here/node_modules/.dpu-installed-lock" 2>/dev/null; then
  (cd "$here" && npm ci --no-audit --no-fund --silent && cp package-lock.json node_modules/.dpu-installed-lock)
fi
case $what in
  check-manifests) exec node "$here/check-manifests.js" "$src" "$build" ;;
  # The checks must fail on each mistake of mutations.js (a typo like hostNetwrok among them).
  mutations) exec node "$here/mutations.js" "$src" "$build" ;;
  # How the agent learns its host's name, in each shape (root: namespaces).
  node-name) exec bash "$here/node_name_test.sh" "$src" "$build" ;;
  # The host DaemonSet's CNI install as rendered, against a real host-shim (root).
  host-install) exec bash "$here/host_install_test.sh" "$src" "$build" ;;
  # The committed field tree of the fake API server matches the pinned package.
  kube-fields)
    node "$here/gen-kube-fields.js" | cmp - "$src/tests/fakes/kube_fields.json" ||
      { echo "FAIL: tests/fakes/kube_fields.json is stale: node tests/deploy/gen-kube-fields.js tests/fakes/kube_fields.json"; exit 1; }
    echo "tests/fakes/kube_fields.json matches kubernetes-models" ;;
esac
