"""The device generator (draws, dropout, bernoulli) and torch.save / torch.load."""
import io

import pytest
import torch
import torch_neuronx


def test_manual_seed_makes_draws_repeatable():
    torch.neuron.manual_seed(1234)
    a = torch.randn(1000, device="neuron").cpu()
    b = torch.rand(10, 10, device="neuron").cpu()
    torch.neuron.manual_seed(1234)
    torch.testing.assert_close(torch.randn(1000, device="neuron").cpu(), a, rtol=0, atol=0)
    torch.testing.assert_close(torch.rand(10, 10, device="neuron").cpu(), b, rtol=0, atol=0)
    torch.neuron.manual_seed(4321)
    assert not torch.equal(torch.randn(1000, device="neuron").cpu(), a)


def test_torch_manual_seed_seeds_neuron_too():
    torch.manual_seed(7)
    a = torch.randn(64, device="neuron").cpu()
    torch.manual_seed(7)
    torch.testing.assert_close(torch.randn(64, device="neuron").cpu(), a, rtol=0, atol=0)
    assert torch.neuron.initial_seed() == 7


def test_rng_state_round_trip():
    torch.neuron.manual_seed(5)
    torch.randn(3, device="neuron")
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    a = torch.randn(100, device="neuron").cpu()
    torch.neuron.set_rng_state(state)
    torch.testing.assert_close(torch.randn(100, device="neuron").cpu(), a, rtol=0, atol=0)
    states = torch.neuron.get_rng_state_all()
    assert len(states) == torch.neuron.device_count()
    with pytest.raises(ValueError, match="16 bytes"):
        torch.neuron.set_rng_state(torch.zeros(3, dtype=torch.uint8))


def test_explicit_generator_and_devices():
    g = torch.Generator(device="neuron")
    g.manual_seed(11)
    a = torch.randn(50, device="neuron", generator=g).cpu()
    g.manual_seed(11)
    torch.testing.assert_close(torch.randn(50, device="neuron", generator=g).cpu(), a, rtol=0, atol=0)
    torch.neuron.manual_seed_all(3)
    x0 = torch.randn(20, device="neuron:0").cpu()
    x1 = torch.randn(20, device="neuron:1").cpu()
    torch.testing.assert_close(x0, x1, rtol=0, atol=0)   # same seed, same stream of numbers


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16], ids=str)
def test_distributions_look_right(dtype):
    torch.neuron.manual_seed(0)
    n = torch.empty(200_000, dtype=dtype, device="neuron").normal_(2.0, 3.0).cpu().double()
    assert abs(n.mean().item() - 2.0) < 0.05 and abs(n.std().item() - 3.0) < 0.05
    u = torch.empty(200_000, dtype=dtype, device="neuron").uniform_(-1.0, 5.0).cpu().double()
    assert u.min().item() >= -1.0 and u.max().item() <= 5.0
    assert abs(u.mean().item() - 2.0) < 0.05
    # a non-contiguous destination gets the same numbers in logical order
    torch.neuron.manual_seed(9)
    flat = torch.randn(6, 4, dtype=dtype, device="neuron").cpu()
    torch.neuron.manual_seed(9)
    t = torch.empty(4, 6, dtype=dtype, device="neuron").t()
    t.normal_()
    torch.testing.assert_close(t.cpu(), flat, rtol=0, atol=0)


def test_bad_random_arguments():
    x = torch.empty(3, device="neuron")
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        x.normal_(0, -1)
    with pytest.raises(RuntimeError, match="uniform_ expects to return a \\[from, to\\) range"):
        x.uniform_(1, 0)


def test_save_load_round_trip():
    state = {
        "w": torch.randn(4, 5).to("neuron"),
        "b": torch.arange(3, dtype=torch.int64).to("neuron:1"),
        "view": torch.randn(6, 6).to("neuron")[1:3, ::2],
        "cpu": torch.ones(2),
    }
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    assert loaded["w"].device == torch.device("neuron", 0)
    assert loaded["b"].device == torch.device("neuron", 1)
    for k in state:
        torch.testing.assert_close(loaded[k].cpu(), state[k].cpu(), rtol=0, atol=0)
    for where, expect in (("cpu", "cpu"), ("neuron:1", "neuron:1"),
                          (torch.device("neuron", 0), "neuron:0"),
                          ({"neuron:1": "neuron:0"}, "neuron:0")):
        buf.seek(0)
        moved = torch.load(buf, map_location=where)
        assert str(moved["b"].device) == expect, where
        torch.testing.assert_close(moved["b"].cpu(), state["b"].cpu())
    buf.seek(0)
    cpu_state = torch.load(buf, map_location="cpu")
    buf2 = io.BytesIO()
    torch.save(cpu_state, buf2)
    buf2.seek(0)
    back = torch.load(buf2, map_location="neuron")
    assert back["w"].device.type == "neuron"


def test_module_state_dict_round_trip(tmp_path):
    m = torch.nn.Linear(3, 2).neuron()
    path = tmp_path / "m.pt"
    torch.save(m.state_dict(), path)
    m2 = torch.nn.Linear(3, 2)
    m2.load_state_dict(torch.load(path, map_location="cpu"))
    torch.testing.assert_close(m2.weight, m.weight.cpu())


def test_randint_and_multinomial_use_the_device_generator():
    torch.neuron.manual_seed(21)
    a = torch.randint(3, 17, (500,), device="neuron").cpu()
    torch.neuron.manual_seed(21)
    torch.testing.assert_close(torch.randint(3, 17, (500,), device="neuron").cpu(), a, rtol=0, atol=0)
    assert a.min().item() >= 3 and a.max().item() <= 16 and len(set(a.tolist())) == 14
    probs = torch.tensor([[0.0, 0.7, 0.3, 0.0], [1.0, 1.0, 1.0, 1.0]])
    torch.neuron.manual_seed(5)
    draws = torch.multinomial(probs.to("neuron"), 2000, replacement=True).cpu()
    assert set(draws[0].tolist()) <= {1, 2}
    assert abs((draws[0] == 1).float().mean().item() - 0.7) < 0.05
    assert abs((draws[1] == 3).float().mean().item() - 0.25) < 0.05
    torch.neuron.manual_seed(5)
    torch.testing.assert_close(torch.multinomial(probs.to("neuron"), 2000, replacement=True).cpu(), draws)
    no_rep = torch.multinomial(probs[1:].to("neuron"), 4).cpu()
    assert sorted(no_rep[0].tolist()) == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="without replacement"):
        torch.multinomial(probs.to("neuron"), 5)
    with pytest.raises(RuntimeError, match="invalid multinomial distribution"):
        torch.multinomial(torch.tensor([[-1.0, 2.0]], device="neuron"), 1).cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_dropout_on_the_device(dtype):
    x = torch.randn(64, 257).to(dtype).to("neuron")
    torch.neuron.manual_seed(3)
    torch_neuronx.clear_op_tracking()
    y = torch.nn.functional.dropout(x, 0.3, training=True)
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}
    kept = y.cpu() != 0
    frac = kept.float().mean().item()
    assert abs(frac - 0.7) < 0.02, frac                      # 16448 draws: 5 sigma is ~0.018
    expect = (x.cpu().float() / 0.7).to(dtype)
    torch.testing.assert_close(y.cpu()[kept], expect[kept])   # kept values scaled by 1 / (1 - p)
    torch.neuron.manual_seed(3)
    assert torch.equal(torch.nn.functional.dropout(x, 0.3, training=True).cpu(), y.cpu())
    assert torch.equal(torch.nn.functional.dropout(x, 0.3, training=False).cpu(), x.cpu())
    assert (torch.nn.functional.dropout(x, 1.0, training=True).cpu() == 0).all()


def test_dropout_gradient_uses_the_mask():
    x = torch.randn(32, 40, device="neuron", requires_grad=True)
    y = torch.nn.functional.dropout(x, 0.5, training=True)
    y.backward(torch.ones_like(y))
    kept = (y != 0).cpu()
    torch.testing.assert_close(x.grad.cpu(), kept.float() * 2.0)


def test_bernoulli_scalar_and_tensor():
    torch_neuronx.clear_op_tracking()
    torch.neuron.manual_seed(0)
    b = torch.empty(200, 100, device="neuron").bernoulli_(0.25)
    assert abs(b.mean().item() - 0.25) < 0.02
    p = torch.tensor([0.0, 1.0, 0.5], device="neuron").expand(4000, 3)
    d = torch.bernoulli(p).cpu()
    assert (d[:, 0] == 0).all() and (d[:, 1] == 1).all() and abs(d[:, 2].mean().item() - 0.5) < 0.04
    i = torch.zeros(1000, dtype=torch.int64, device="neuron").bernoulli_(0.5)
    assert ((i == 0) | (i == 1)).all() and 400 < i.sum().item() < 600
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}
    with pytest.raises(RuntimeError, match="p to be in"):
        torch.empty(3, device="neuron").bernoulli_(1.5)
    with pytest.raises(RuntimeError, match="probabilities"):
        torch.bernoulli(torch.tensor([0.5, 2.0], device="neuron"))
        torch.neuron.synchronize()
