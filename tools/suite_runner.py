"""Runs a library's own pytest suites on the CPU and on neuron, each in a process of its own, and
prints one table (used by diffusers_suites.py).

Each run writes a JUnit XML report, which gives every test's outcome; a pytest plugin
(`_fallback_report`, loaded with -p) records the ops that fell back to the CPU in the neuron run.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))


def outcomes(junit_path):
    """{test id: "passed" | "failed" | "skipped"} from a JUnit XML report."""
    result = {}
    if not os.path.exists(junit_path):
        return result
    for case in ET.parse(junit_path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        tags = {child.tag for child in case}
        result[name] = "failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags else "passed"
    return result


def run_suite(test_file, cwd, env, timeout):
    """(outcomes, fallback ops, wall seconds, tail of the output) of one pytest run."""
    with tempfile.TemporaryDirectory() as tmp:
        junit, fallbacks = os.path.join(tmp, "junit.xml"), os.path.join(tmp, "fallbacks.json")
        env = dict(env, TN_SUITE_FALLBACKS=fallbacks,
                   PYTHONPATH=os.pathsep.join(filter(None, [HERE, env.get("PYTHONPATH")])))
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_fallback_report",
               f"--junitxml={junit}", test_file]
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                                  start_new_session=True)
            tail = (proc.stdout + proc.stderr)[-3000:]
        except subprocess.TimeoutExpired as e:
            tail = f"timed out after {timeout} s\n" + ((e.stdout or b"")[-3000:].decode(errors="replace")
                                                      if isinstance(e.stdout, bytes) else (e.stdout or "")[-3000:])
        wall = time.perf_counter() - start
        ops = {}
        if os.path.exists(fallbacks):
            with open(fallbacks) as f:
                ops = json.load(f)
        return outcomes(junit), ops, wall, tail


def compare(cpu, neuron):
    """Counts for one suite: tests, passing on both, failing on neuron only, failing on the CPU
    only, failing on both, skipped on both, and the tests the CPU skips (accelerator-only ones)
    that neuron runs: passed and failed."""
    names = set(cpu) | set(neuron)
    row = dict(tests=len(names), both=0, neuron_only=[], cpu_only=[], both_fail=0, skipped=0,
               accel_pass=0, accel_fail=[])
    for name in sorted(names):
        c, n = cpu.get(name, "missing"), neuron.get(name, "missing")
        if c == "skipped" and n == "passed":
            row["accel_pass"] += 1
        elif c == "skipped" and n == "failed":
            row["accel_fail"].append(name)
        elif "skipped" in (c, n) or "missing" in (c, n):
            row["skipped"] += 1
        elif c == n == "passed":
            row["both"] += 1
        elif c == "passed":
            row["neuron_only"].append(name)
        elif n == "passed":
            row["cpu_only"].append(name)
        else:
            row["both_fail"] += 1
    return row


def print_table(rows, show_failures):
    header = ("suite", "tests", "pass both", "fail neuron only", "fail cpu only", "fail both", "skipped",
              "accelerator-only: pass / fail", "cpu s", "neuron s", "fallback ops")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, row in rows:
        ops = ", ".join(f"{op} x{n}" for op, n in sorted(row["fallbacks"].items())) or "none"
        print(f"| {name} | {row['tests']} | {row['both']} | {len(row['neuron_only'])} | {len(row['cpu_only'])} | "
              f"{row['both_fail']} | {row['skipped']} | {row['accel_pass']} / {len(row['accel_fail'])} | "
              f"{row['cpu_s']:.0f} | {row['neuron_s']:.0f} | {ops} |")
    if show_failures:
        for name, row in rows:
            for what, key in (("fails on neuron only", "neuron_only"), ("fails on the CPU only", "cpu_only"),
                              ("accelerator-only, fails on neuron", "accel_fail")):
                for test in row[key]:
                    print(f"{what}: {name}: {test}")


def run(suites, tree, device_env, timeout, show_failures, progress=print):
    """suites: {name: test file relative to tree}; device_env(device) gives the environment of
    a run on "cpu" or "neuron"."""
    rows = []
    for name, path in suites.items():
        results = {}
        for device in ("cpu", "neuron"):
            progress(f"[{name}] {device}: {path}", flush=True)
            results[device] = run_suite(path, tree, device_env(device), timeout)
            tests = results[device][0]
            if not tests:
                progress(f"[{name}] {device}: no report; output ends with:\n{results[device][3]}", flush=True)
        row = compare(results["cpu"][0], results["neuron"][0])
        row.update(fallbacks=results["neuron"][1], cpu_s=results["cpu"][2], neuron_s=results["neuron"][2])
        rows.append((name, row))
    print_table(rows, show_failures)
    return rows
