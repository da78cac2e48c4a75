"""Optimizers on neuron against the same optimizer on the CPU: the fused Adam/AdamW kernel
(one launch per step), the default foreach path, and gradient clipping."""
import pytest
import torch
import torch_neuronx

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}


def twin_params(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    cpu = [torch.nn.Parameter(torch.randn(s, generator=g).to(dtype)) for s in [(7, 5), (33,), (2, 3, 4), (0,)]]
    dev = [torch.nn.Parameter(p.detach().to("neuron")) for p in cpu]
    return cpu, dev


def run_steps(cpu_opt, dev_opt, cpu, dev, steps=3, scale=None):
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        for p, d in zip(cpu, dev):
            grad = torch.randn(p.shape, generator=g).to(p.dtype)
            p.grad, d.grad = grad.clone(), grad.to("neuron")
        cpu_opt.step()
        dev_opt.step()


@pytest.mark.parametrize("cls", [torch.optim.AdamW, torch.optim.Adam], ids=lambda c: c.__name__)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("options", [dict(), dict(amsgrad=True), dict(maximize=True, weight_decay=0.0),
                                     dict(lr=torch.tensor(0.02))], ids=["plain", "amsgrad", "maximize", "tensor_lr"])
def test_fused_adam_matches_cpu(cls, dtype, options):
    cpu, dev = twin_params(dtype)
    kw = dict(lr=1e-2, weight_decay=0.1)
    kw.update(options)
    cpu_opt, dev_opt = cls(cpu, fused=True, **kw), cls(dev, fused=True, **kw)
    torch_neuronx.clear_op_tracking()
    run_steps(cpu_opt, dev_opt, cpu, dev)
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    for p, d in zip(cpu, dev):
        torch.testing.assert_close(d.detach().cpu(), p.detach(), **TOL[dtype])
    for name in ("exp_avg", "exp_avg_sq"):
        torch.testing.assert_close(dev_opt.state[dev[0]][name].cpu(), cpu_opt.state[cpu[0]][name], **TOL[dtype])


def test_fused_adam_with_grad_scale_and_found_inf():
    cpu, dev = twin_params(torch.float32)
    for found in (0.0, 1.0):
        for params, device in ((cpu, "cpu"), (dev, "neuron")):
            for p in params:
                p.grad = torch.full(p.shape, 4.0, device=device)
            torch._fused_adamw_(params, [p.grad for p in params],
                                [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params], [],
                                [torch.ones((), device=device) for p in params], lr=0.1, beta1=0.9, beta2=0.999,
                                weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False,
                                grad_scale=torch.tensor(2.0, device=device), found_inf=torch.tensor(found, device=device))
        for p, d in zip(cpu, dev):
            torch.testing.assert_close(d.detach().cpu(), p.detach())
            torch.testing.assert_close(d.grad.cpu(), p.grad)    # unscaled in place, unless skipped


@pytest.mark.parametrize("cls", [torch.optim.AdamW, torch.optim.SGD], ids=lambda c: c.__name__)
def test_default_foreach_path_and_clipping(cls):
    cpu, dev = twin_params(torch.float32)
    kw = dict(lr=1e-2, momentum=0.9) if cls is torch.optim.SGD else dict(lr=1e-2)
    cpu_opt, dev_opt = cls(cpu, **kw), cls(dev, **kw)
    torch_neuronx.clear_op_tracking()
    run_steps(cpu_opt, dev_opt, cpu, dev)
    n_cpu = torch.nn.utils.clip_grad_norm_(cpu, 0.5)
    n_dev = torch.nn.utils.clip_grad_norm_(dev, 0.5)
    torch.neuron.synchronize()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    torch.testing.assert_close(n_dev.cpu(), n_cpu)
    for p, d in zip(cpu, dev):
        torch.testing.assert_close(d.detach().cpu(), p.detach(), **TOL[torch.float32])
        torch.testing.assert_close(d.grad.cpu(), p.grad, **TOL[torch.float32])
