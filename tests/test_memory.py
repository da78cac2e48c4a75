"""Memory statistics, capacity and out-of-memory errors, the cache, and neuron-ls."""
import json
import subprocess
import sys

import pytest
import torch
import torch_neuronx

from conftest import run_python

MiB = 1 << 20


def test_stats_follow_allocations():
    torch.neuron.synchronize()
    torch.neuron.empty_cache()
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    x = torch.empty(3 * MiB, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_allocated() == base + 3 * MiB
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()
    assert torch.accelerator.memory_allocated(0) == torch.neuron.memory_allocated(0)
    stats = torch.neuron.memory_stats()
    assert stats["allocation.all.current"] >= 1
    assert stats["requested_bytes.all.current"] >= 3 * MiB
    del x
    assert torch.neuron.memory_allocated() == base
    assert torch.neuron.max_memory_allocated() >= base + 3 * MiB
    reserved = torch.neuron.memory_reserved()
    y = torch.empty(3 * MiB, dtype=torch.uint8, device="neuron")   # served from the cache
    assert torch.neuron.memory_reserved() == reserved
    del y
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() < reserved
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == torch.neuron.memory_allocated()
    free, total = torch.neuron.mem_get_info()
    assert total == 16 * 2**30 and 0 < free <= total


def test_devices_have_separate_pools():
    before = torch.neuron.memory_allocated(1)
    x = torch.empty(MiB, dtype=torch.uint8, device="neuron:1")
    assert torch.neuron.memory_allocated(1) == before + MiB
    del x


def test_summary_is_readable():
    x = torch.empty(MiB, device="neuron")
    text = torch.neuron.memory_summary()
    assert "neuron:0 memory summary" in text and "Allocated memory" in text
    assert "from large pool" in text
    del x


def test_thousand_cycles_keep_reserved_bounded():
    torch.neuron.synchronize()
    torch.neuron.empty_cache()
    allocs_before = torch.neuron.memory_stats()["num_device_alloc"]
    for i in range(1000):
        a = torch.empty(2 * MiB + (i % 7) * 4096, dtype=torch.uint8, device="neuron")
        b = torch.empty(1000 + i % 13, device="neuron")
        del a, b
    assert torch.neuron.memory_reserved() <= 8 * MiB
    assert torch.neuron.memory_stats()["num_device_alloc"] - allocs_before < 40


def test_out_of_memory_error_has_the_figures():
    r = run_python("""
        import torch
        keep = torch.empty(40 << 20, dtype=torch.uint8, device="neuron")
        try:
            torch.empty(30 << 20, dtype=torch.uint8, device="neuron")
        except torch.OutOfMemoryError as e:
            print(e)
        s = torch.neuron.memory_stats()
        print(s["num_ooms"], s["num_alloc_retries"])
        del keep
        ok = torch.empty(60 << 20, dtype=torch.uint8, device="neuron")   # room again
        print(ok.numel())
    """, env={"NEURON_RT_DEVICE_MEMORY": "64MiB"})
    assert r.returncode == 0, r.stderr
    msg, counts, ok = r.stdout.strip().splitlines()
    assert "Tried to allocate 30.00 MiB on neuron:0" in msg
    assert "total capacity of 64.00 MiB" in msg
    assert "40.00 MiB is allocated by tensors" in msg
    assert "40.00 MiB is reserved" in msg
    assert counts == "1 1"
    assert ok == str(60 << 20)


def test_huge_request_is_an_oom_not_a_crash():
    with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate"):
        torch.empty(1 << 40, dtype=torch.uint8, device="neuron")
    torch.ones(1, device="neuron").cpu()


def test_neuron_ls_shows_other_processes():
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import torch, sys; x = torch.empty(96 << 20, dtype=torch.uint8, device='neuron:1'); "
         "print('ready', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        out = subprocess.run([sys.executable, "-m", "torch_neuronx.tools.neuron_ls", "--json"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        cores = {c["device"]: c for c in json.loads(out.stdout)}
        assert cores["neuron:1"]["in_use"] >= 96 << 20
        assert holder.pid in cores["neuron:1"]["processes"]
        assert cores["neuron:0"]["capacity"] == 16 * 2**30
        table = subprocess.run([sys.executable, "-m", "torch_neuronx.tools.neuron_ls"],
                               capture_output=True, text=True, timeout=60)
        assert "neuron:1" in table.stdout and "CAPACITY" in table.stdout
        assert f"Kernels: {torch_neuronx._C._isa()} " in table.stdout  # the variant the kernels run
    finally:
        holder.stdin.close()
        holder.wait(30)


HUGE_PAGES_SCRIPT = """
import torch, torch_neuronx
x = torch.ones(8 << 20, device="neuron")  # 32 MiB: one block of its own
small = torch.ones(1000, device="neuron")
torch.neuron.synchronize()

def mapping(address):
    fields, inside = {}, False
    for line in open("/proc/self/smaps"):
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(v, 16) for v in head.split("-"))
            inside = lo <= address < hi
        elif inside:
            fields[head.rstrip(":")] = line.split()[1]
    return fields

print(x.data_ptr() % (2 << 20), mapping(x.data_ptr()).get("THPeligible"),
      mapping(small.data_ptr()).get("THPeligible"))
"""


@pytest.mark.parametrize("setting", ["1", "0"])
def test_large_blocks_ask_for_huge_pages(setting):
    """Blocks of 2 MiB and more start on a 2 MiB boundary and are advised to use transparent
    huge pages (the kernel marks the mapping eligible); TN_HUGE_PAGES=0 leaves them out."""
    try:
        mode = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        pytest.skip("this kernel has no transparent huge pages")
    if "[never]" in mode:
        pytest.skip("transparent huge pages are turned off on this machine")
    r = run_python(HUGE_PAGES_SCRIPT, env={"TN_HUGE_PAGES": setting})
    assert r.returncode == 0, r.stderr[-2000:]
    offset, large, small = r.stdout.split()
    assert offset == "0"
    if "[madvise]" in mode:
        assert (large, small) == (setting, "0")
    else:  # [always]: every mapping is eligible
        assert large == "1"
