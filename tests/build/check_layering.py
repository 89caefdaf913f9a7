#!/usr/bin/env python3
"""Checks the CMake target graph against layering.rules.

Usage: check_layering.py BUILD_DIR RULES_FILE
It asks CMake for the target graph (--graphviz) and fails, naming the edge and
the rule, when one of our libraries links something the architecture forbids.
"""
import fnmatch
import os
import re
import subprocess
import sys
import tempfile


def load_rules(path):
    rules = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 3 or parts[1] not in ("may", "never"):
                sys.exit(f"{path}:{n}: expected '<target> may|never <dependency>', got: {line}")
            rules.append(tuple(parts))
    return rules


def load_edges(build_dir):
    with tempfile.TemporaryDirectory() as tmp:
        dot = os.path.join(tmp, "graph.dot")
        subprocess.run(["cmake", f"--graphviz={dot}", build_dir], check=True,
                       stdout=subprocess.DEVNULL)
        edges = set()
        with open(dot) as f:
            for line in f:
                m = re.search(r"//\s*(\S+)\s*->\s*(\S+)\s*$", line)
                if m:
                    edges.add((m.group(1), m.group(2)))
    return edges


def main():
    build_dir, rules_path = sys.argv[1], sys.argv[2]
    rules = load_rules(rules_path)
    edges = load_edges(build_dir)
    ours = [e for e in edges if e[0].startswith("dpu_") and not e[0].startswith("dpu_test")]
    if not ours:
        sys.exit("no dpu_* targets in the graph: is this a configured build directory?")
    errors = []
    for src, dst in sorted(ours):
        dep = os.path.basename(dst)
        for target, verb, pattern in rules:
            if verb == "never" and fnmatch.fnmatch(src, target) and fnmatch.fnmatch(dep, pattern):
                errors.append(f"{src} -> {dst}: forbidden by '{target} never {pattern}'")
        if dep.startswith("dpu_") or dep.startswith("dpu::"):
            allowed = any(verb == "may" and fnmatch.fnmatch(src, target) and fnmatch.fnmatch(dep, pattern)
                          for target, verb, pattern in rules)
            if not allowed:
                errors.append(f"{src} -> {dep}: no 'may' rule in {rules_path} allows it")
    for e in errors:
        print("layering:", e, file=sys.stderr)
    print(f"layering: {len(ours)} edges of our libraries checked, {len(errors)} violations")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
