#!/usr/bin/env python3
"""The link graph of the ft_* libraries, read from CMake's own dependency graph (cmake --graphviz on
the build tree): fails when the ft_* libraries link in a cycle, or when the planner's cost model
(ft_plan: what `fluxtrain plan` always runs, with no ranks) links MPI, oneDNN, the trainer or the
parallel library, directly or through another library.

    tests/lint/link_graph_test.py BUILD_DIR        # prints ft_plan's libraries; exit 1 on a finding
"""
import re
import subprocess
import sys
import tempfile

# Libraries ft_plan must not reach: a regex over CMake's target names (imported targets included).
FORBIDDEN_FOR_PLAN = {
    "MPI": r"^MPI::|libmpi",
    "oneDNN": r"^DNNL::|dnnl",
    "the trainer (ft_train)": r"^ft_train$",
    "the parallel library (ft_parallel)": r"^ft_parallel$",
    "the aggregate config (ft_config, which links the trainer)": r"^ft_config$",
}


def read_graph(build_dir):
    """{target: set(targets it links)} from `cmake --graphviz`."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["cmake", f"--graphviz={tmp}/g.dot", "."], cwd=build_dir, check=True,
                       stdout=subprocess.DEVNULL)
        text = open(f"{tmp}/g.dot").read()
    names = dict(re.findall(r'^\s*"(node\d+)" \[ label = "([^"]+)"', text, re.M))
    edges = {}
    for a, b in re.findall(r'^\s*"(node\d+)" -> "(node\d+)"', text, re.M):
        edges.setdefault(names[a], set()).add(names[b])
    return edges


def reachable(edges, start):
    seen, todo = set(), [start]
    while todo:
        for n in edges.get(todo.pop(), ()):
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def ft_cycles(edges):
    """Each strongly connected set of ft_* libraries with more than one member (or a self-link)."""
    libs = sorted(n for n in edges if n.startswith("ft_"))
    reach = {n: reachable(edges, n) for n in libs}
    cycles, done = [], set()
    for n in libs:
        if n in done or n not in reach[n]:
            continue
        group = sorted(m for m in libs if m in reach[n] and n in reach.get(m, ()))
        done.update(group)
        cycles.append(group)
    return cycles


def main():
    edges = read_graph(sys.argv[1])
    failures = []
    for group in ft_cycles(edges):
        failures.append("the ft_* libraries link in a cycle: " + " <-> ".join(group))
    if "ft_plan" not in edges:
        failures.append("no target ft_plan in the build's dependency graph")
    plan = reachable(edges, "ft_plan")
    print("ft_plan links: " + ", ".join(sorted(plan)))
    for what, pattern in FORBIDDEN_FOR_PLAN.items():
        hits = sorted(n for n in plan if re.search(pattern, n))
        if hits:
            failures.append(f"ft_plan links {what}: " + ", ".join(hits))
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("ok: no cycle among the ft_* libraries; ft_plan links no MPI, oneDNN, trainer or parallel library")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
