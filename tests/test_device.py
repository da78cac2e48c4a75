"""The device as users meet it: autoload, torch.accelerator, the device module, errors."""
import pytest
import torch

from conftest import run_python


def test_autoload_without_import():
    r = run_python("""
        import torch
        x = torch.randn(64, 64).to("neuron")
        y = torch.nn.functional.relu(x @ x).sum(0)
        torch.neuron.synchronize()
        ref = torch.nn.functional.relu(x.cpu() @ x.cpu()).sum(0)
        torch.testing.assert_close(y.cpu(), ref)
        print(torch.accelerator.current_accelerator(), "torch_neuronx" in __import__("sys").modules)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["neuron", "True"]


def test_autoload_can_be_disabled():
    r = run_python("""
        import torch
        print(hasattr(torch, "neuron"))
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.device_count() == torch.neuron.device_count() == 2
    torch.accelerator.synchronize()


def test_device_module_basics():
    assert torch.neuron.is_available()
    p = torch.neuron.get_device_properties(1)
    assert p.name == torch.neuron.get_device_name(1) == "NeuronCore-v2"
    assert p.total_memory == 16 * 2**30
    assert torch.neuron.is_bf16_supported()
    assert torch.bfloat16 in torch.neuron.get_amp_supported_dtype()
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(1):
        assert torch.neuron.current_device() == 1
        assert torch.empty(3, device="neuron").device == torch.device("neuron", 1)
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device("neuron:1")
    try:
        assert torch.zeros(2, device="neuron").device.index == 1
    finally:
        torch.neuron.set_device(0)


def test_tensor_and_module_methods():
    t = torch.arange(4.0)
    assert t.neuron().device == torch.device("neuron", 0)
    assert t.neuron(1).device == torch.device("neuron", 1)
    assert t.to("neuron").is_neuron
    m = torch.nn.Linear(4, 2).neuron()
    assert all(p.device.type == "neuron" for p in m.parameters())
    torch.testing.assert_close(m.cpu().weight, m.weight.cpu())


def test_module_to_keeps_parameters_and_ties():
    """`model.to("neuron")` moves each Parameter's data in place, as for CUDA: the Parameter
    objects stay (optimizers and hooks made before the move keep working) and so do weight
    ties, whose gradient then sums both uses."""
    embed = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = embed.weight
    model = torch.nn.Sequential(embed, head)
    weight = embed.weight
    ids = torch.tensor([[1, 2, 3]])
    model(ids).square().sum().backward()
    expect = weight.grad.clone()
    weight.grad = None

    model.to("neuron")
    assert embed.weight is weight and head.weight is weight and weight.is_neuron
    model(ids.to("neuron")).square().sum().backward()
    torch.testing.assert_close(weight.grad.cpu(), expect)
    model.cpu()
    assert head.weight is weight and weight.device.type == "cpu" and weight.grad.device.type == "cpu"

    # the same answer as between CPU and CUDA, which `.data =` and Module._apply rely on
    a, b = torch.ones(2), torch.ones(3, dtype=torch.float64, device="neuron")
    assert torch._has_compatible_shallow_copy_type(a, b)
    assert torch._has_compatible_shallow_copy_type(b, a)
    a.data = b
    assert a.is_neuron and a.dtype == torch.float64
    assert not torch._has_compatible_shallow_copy_type(b, torch.ones(2).to_sparse())


@pytest.mark.parametrize("make", [
    lambda: torch.empty(2, device="neuron:5"),
    lambda: torch.neuron.set_device(5),
    lambda: torch.ones(2).to("neuron:7"),
    lambda: torch.neuron.get_device_properties(2),
])
def test_invalid_device_index(make):
    with pytest.raises(RuntimeError, match=r"Invalid device id: \d\. Valid range is 0 to 1"):
        make()
    torch.ones(1, device="neuron").cpu()  # still usable


def test_mixing_cpu_and_neuron(quiet_fallback):
    a, b = torch.ones(3, device="neuron"), torch.ones(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + b
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(torch.ones(2, 2), torch.ones(2, 2, device="neuron"))


def test_visible_cores_and_defaults():
    code = """
        import torch
        print(torch.neuron.device_count(),
              [torch.neuron.get_device_properties(i).physical_core for i in range(torch.neuron.device_count())],
              torch.neuron.get_device_properties(0).total_memory)
    """
    cases = [
        ({"NEURON_RT_VISIBLE_CORES": "0-3"}, "4 [0, 1, 2, 3] 17179869184"),
        ({"NEURON_RT_VISIBLE_CORES": "1,3"}, "2 [1, 3] 17179869184"),
        ({"NEURON_RT_NUM_CORES": "3"}, "3 [0, 1, 2] 17179869184"),
        # under torchrun every process sees the host's cores (at least one per local rank)
        ({"LOCAL_RANK": "5"}, "6 [0, 1, 2, 3, 4, 5] 17179869184"),
        ({"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}, "4 [0, 1, 2, 3] 17179869184"),
        ({"LOCAL_RANK": "5", "NEURON_RT_VISIBLE_CORES": "2"}, "1 [2] 17179869184"),
        # two physical cores per logical core, with twice the memory
        ({"NEURON_LOGICAL_NC_CONFIG": "2", "NEURON_RT_NUM_CORES": "2"}, "2 [0, 2] 34359738368"),
        ({"NEURON_RT_DEVICE_MEMORY": "512MiB"}, "2 [0, 1] 536870912"),
    ]
    for env, expected in cases:
        base = {"NEURON_RT_VISIBLE_CORES": "", "NEURON_RT_NUM_CORES": "", "LOCAL_RANK": "",
                "LOCAL_WORLD_SIZE": "", "NEURON_LOGICAL_NC_CONFIG": ""}
        base.update(env)
        r = run_python(code, env=base)
        assert r.returncode == 0, (env, r.stderr)
        assert r.stdout.strip() == expected, env


def test_bad_environment_is_reported():
    r = run_python("""
        import torch
        print(torch.neuron.is_available())
        try:
            torch.ones(1, device="neuron")
        except RuntimeError as e:
            print(e)
    """, env={"NEURON_RT_VISIBLE_CORES": "3-1"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "False"
    assert "NEURON_RT_VISIBLE_CORES='3-1' is not a core list" in lines[1]


def test_forked_child_gets_a_clear_error():
    r = run_python("""
        import multiprocessing as mp
        import torch
        torch.ones(3, device="neuron").cpu()   # device work starts the runtime's threads

        def child(q):
            for f in (lambda: torch.ones(2, device="neuron"), torch.neuron.current_device):
                try:
                    f()
                    q.put("no error")
                except RuntimeError as e:
                    q.put(str(e))
            torch.manual_seed(1)   # seeding (as DataLoader workers do) must not fail
            q.put("seeded")

        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start(); p.join(30)
        print(p.exitcode)
        for _ in range(3):
            print(q.get(timeout=5))
    """)
    assert r.returncode == 0, r.stderr
    out = r.stdout.strip().splitlines()
    assert out[0] == "0"
    assert "'spawn'" in out[1] and "'spawn'" in out[2]
    assert out[3] == "seeded"


def test_spawned_child_uses_the_device():
    r = run_python("""
        import torch, torch.multiprocessing as mp

        def child(rank):
            x = torch.full((4,), float(rank), device="neuron")
            assert x.sum().item() == 4 * rank

        if __name__ == "__main__":
            torch.ones(1, device="neuron").cpu()
            mp.spawn(child, nprocs=2)
            print("ok")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_torchrun_binding_and_one_device_per_distributed_process():
    """Under torchrun a process starts on core LOCAL_RANK; once its process group has bound a
    core, another core is refused with TorchNeuron's message."""
    code = """
        import datetime, torch, torch.distributed as dist
        print(torch.neuron.current_device(), torch.neuron.device_count())
        dist.init_process_group("neuron", rank=0, world_size=1, timeout=datetime.timedelta(seconds=20))
        x = torch.ones(3, device="neuron")
        dist.all_reduce(x)
        try:
            torch.ones(1, device="neuron:0")
        except RuntimeError as e:
            print("refused:", "more than one device per process" in str(e))
        print(x.cpu().tolist())
        dist.destroy_process_group()
    """
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(port), "NEURON_RT_VISIBLE_CORES": "", "NEURON_RT_NUM_CORES": ""}
    r = run_python(code, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["1 2", "refused: True", "[1.0, 1.0, 1.0]"], r.stdout
