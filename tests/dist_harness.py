"""Multi-process harness for the torch.distributed tests.

    from dist_harness import BACKEND, DEVICE, init, run_ranks

    def _worker(rank, world_size, n):          # module level: spawn pickles it by name
        init(rank, world_size)                 # binds the device, starts the default group
        t = torch.ones(n, device=DEVICE)
        dist.all_reduce(t)
        return t.cpu()                         # picklable return values come back by rank

    results = run_ranks(_worker, world_size=2, args=(10,))

`run_ranks` starts `world_size` processes with the `spawn` start method (never fork: the device
runtime has threads). Each child gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR=127.0.0.1 and a free MASTER_PORT (plus `env`) in its environment from its very
start, so they are in place before torch (and the device's autoload) is imported. Each child
runs in its own session (os.setsid), its stdout/stderr (including C-level output) go to a file.
The parent polls: as soon as one rank fails (exception or abnormal exit) or the run passes
`timeout` seconds, every child's session is SIGKILLed and an AssertionError is raised with each
rank's status, traceback and captured output; a hang never hangs pytest. Ranks listed in
`may_die` may exit abnormally or without a result (fault tests); their result is None, and so is
the result of a rank that leaves through os._exit. A default process group still alive when `fn`
returns is destroyed by the harness.

Backend switch, TN_DIST_TEST_BACKEND:
  "neuron" (default): device "neuron", process-group backend "neuron"; each rank imports
                      torch_neuronx and binds its core with torch.accelerator.set_device_index.
  "gloo":             device "cpu", backend "gloo" (validates the tests without the device;
                      torch_neuronx is never imported by the harness).
TN_DIST_TEST_PG_TIMEOUT: default process-group timeout of `init`, seconds (60).

Scripts under torchrun (or any launcher command): `run_torchrun(script_and_args, nproc, env,
timeout)` runs `python -m torch.distributed.run` on a free port in a session of its own, output
to a file; a timeout SIGKILLs torchrun's and every worker's process group, and a timeout or a
nonzero exit fails the test with the output's tail. `child_env(extra)` is the environment to
give it: this process's, minus any outer launcher's rank variables, offline, one OpenMP thread.
"""
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

BACKEND = os.environ.get("TN_DIST_TEST_BACKEND", "neuron")
if BACKEND not in ("neuron", "gloo"):
    raise ValueError(f"TN_DIST_TEST_BACKEND must be 'neuron' or 'gloo', not {BACKEND!r}")
DEVICE = "cpu" if BACKEND == "gloo" else "neuron"
PG_TIMEOUT = float(os.environ.get("TN_DIST_TEST_PG_TIMEOUT", "60"))


def free_port():
    """A TCP port that was free a moment ago (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init(rank, world_size, backend=None, timeout=None, **kwargs):
    """In a child: binds this rank's device (LOCAL_RANK) and starts the default process group
    (env:// rendezvous); `timeout` in seconds. Returns the rank's torch.device."""
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if DEVICE != "cpu":
        import torch_neuronx  # noqa: F401  (autoloaded too; explicit so a missing build is loud)
        torch.accelerator.set_device_index(local_rank)
        device = torch.device(DEVICE, local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend or BACKEND, rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=timeout or PG_TIMEOUT), **kwargs)
    return device


def _child(fn, rank, world_size, args, outdir):
    os.setsid()  # own session: the parent kills the whole session, grandchildren included
    log = os.open(os.path.join(outdir, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        result = ("ok", fn(rank, world_size, *args))
        if dist.is_initialized():
            dist.destroy_process_group()
        payload = pickle.dumps(result)
    except BaseException:  # noqa: BLE001  (everything goes to the parent)
        payload = pickle.dumps(("error", traceback.format_exc()))
    path = os.path.join(outdir, f"rank{rank}.result")
    with open(path + ".tmp", "wb") as f:
        f.write(payload)
    os.rename(path + ".tmp", path)
    if pickle.loads(payload)[0] != "ok":
        os._exit(1)


def _read_result(outdir, rank):
    try:
        with open(os.path.join(outdir, f"rank{rank}.result"), "rb") as f:
            return pickle.load(f)
    except FileNotFoundError:
        return None


def _report(why, procs, outdir, started):
    parts = [f"{why} (after {time.monotonic() - started:.1f} s, backend {BACKEND})"]
    for rank, p in enumerate(procs):
        res = _read_result(outdir, rank)
        code = p.exitcode
        status = ("running (killed)" if code is None else
                  f"killed by signal {-code}" if code < 0 else f"exit code {code}")
        parts.append(f"----- rank {rank}: {status}")
        if res is not None and res[0] == "error":
            parts.append(res[1].rstrip())
        try:
            with open(os.path.join(outdir, f"rank{rank}.log"), errors="replace") as f:
                out = f.read()
        except FileNotFoundError:
            out = "(none: the child died before running fn; its stderr went to the parent's)"
        if out.strip():
            parts.append(f"--- rank {rank} output (last 6000 chars):\n{out[-6000:].rstrip()}")
    return "\n".join(parts)


def _kill_all(procs):
    for p in procs:
        if p.exitcode is None and p.pid:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the child's session id is its pid
            except (ProcessLookupError, PermissionError):
                p.kill()
    for p in procs:
        p.join(10)


def run_ranks(fn, world_size=2, timeout=120, env=None, args=(), may_die=()):
    """Runs fn(rank, world_size, *args) in `world_size` spawned processes; returns the list of
    their return values by rank. Raises AssertionError (with every rank's traceback and output)
    when a rank raises or dies (unless listed in `may_die`) or the run exceeds `timeout` s."""
    ctx = mp.get_context("spawn")
    port = free_port()
    procs = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tn_dist_test_") as outdir:
        saved = dict(os.environ)
        try:
            for rank in range(world_size):
                os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world_size),
                                   "LOCAL_RANK": str(rank),
                                   "LOCAL_WORLD_SIZE": str(world_size),
                                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
                os.environ.update(env or {})
                p = ctx.Process(target=_child, args=(fn, rank, world_size, tuple(args), outdir),
                                name=f"rank{rank}")
                p.start()  # the spawned interpreter inherits os.environ as it is now
                procs.append(p)
                os.environ.clear()
                os.environ.update(saved)
            while True:
                failed = [r for r, p in enumerate(procs)
                          if p.exitcode not in (None, 0) and r not in may_die]
                if failed:
                    raise AssertionError(_report(f"rank {failed[0]} failed", procs, outdir,
                                                 started))
                if all(p.exitcode is not None for p in procs):
                    break
                if time.monotonic() - started > timeout:
                    raise AssertionError(_report(f"timed out after {timeout} s", procs,
                                                 outdir, started))
                time.sleep(0.05)
            results = []
            for rank in range(world_size):
                res = _read_result(outdir, rank)
                if res is not None and res[0] == "error" and rank not in may_die:
                    raise AssertionError(_report(f"rank {rank} failed", procs, outdir, started))
                results.append(res[1] if res is not None and res[0] == "ok" else None)
            return results
        finally:
            os.environ.clear()
            os.environ.update(saved)
            _kill_all(procs)


# ---------------------------------------------------------------- commands under torchrun


def child_env(env=None):
    """This process's environment for a launched command (see the module docstring)."""
    full = dict(os.environ)
    # Whatever this process inherited from an outer launcher must not leak into torchrun's.
    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        full.pop(var, None)
    full.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TN_DIST_TEST_BACKEND=BACKEND,
                PYTHONUNBUFFERED="1")
    if BACKEND == "gloo":
        # Everything on the CPU: keep the (possibly unbuilt) project extension out.
        full["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    else:
        full.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)  # workers as users run them
    full.update(env or {})
    return full


def tail(text, lines=150):
    return "\n".join(text.splitlines()[-lines:])


def _descendants(pid):
    """Every live descendant of `pid` (from /proc), children before grandchildren."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(0), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(proc):
    """SIGKILLs a launcher's process group and, since torchrun starts each worker in a session
    of its own (torch.distributed.elastic does), every worker's process group too."""
    workers = _descendants(proc.pid)
    for pid in [proc.pid, *workers]:
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def _run(cmd, env, timeout, what, cwd=None):
    """(exit code, output) of `cmd` run in a session of its own with its output in a file; a
    timeout kills it and everything it started, and fails the test."""
    import pytest

    with tempfile.TemporaryDirectory() as tmp:
        # Output to a file, not a pipe: a stray worker holding a pipe open would block.
        log_path = os.path.join(tmp, "output.txt")
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True,
                                    env=env if env is not None else child_env(),
                                    start_new_session=True, cwd=cwd)
            try:
                proc.wait(timeout=timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                kill_tree(proc)
                timed_out = True
        with open(log_path, errors="replace") as log:
            out = log.read()
    if timed_out:
        pytest.fail(f"{what} timed out after {timeout}s:\n{tail(out)}")
    return proc.returncode, out


def run_command(cmd, env=None, timeout=180, what=None, cwd=None):
    """Runs `cmd` (see _run); a nonzero exit fails the test with the output. Returns the output."""
    import pytest

    what = what or " ".join(map(str, cmd[:4]))
    code, out = _run(cmd, env, timeout, what, cwd)
    if code != 0:
        pytest.fail(f"{what} exited with {code}:\n{tail(out)}")
    return out


def run_torchrun(script_and_args, nproc=2, env=None, timeout=180, what=None, cwd=None):
    """`python -m torch.distributed.run --nproc_per_node=nproc` on a free port (once more on
    another port if the first was taken meanwhile), in the folder cwd; returns the output (see
    run_command)."""
    import pytest

    what = what or f"{script_and_args[0]} (nproc={nproc})"
    for attempt in range(2):
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
               "--nnodes=1", "--master_addr=127.0.0.1", f"--master_port={free_port()}",
               *map(str, script_and_args)]
        code, out = _run(cmd, env, timeout, what, cwd)
        if code == 0:
            return out
        if attempt == 0 and "address already in use" in out.lower():
            continue  # lost the race for the port: once more on another one
        pytest.fail(f"{what} exited with {code}:\n{tail(out)}")
