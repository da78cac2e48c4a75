"""Optimizers on neuron against the same optimizer on the CPU: the fused Adam/AdamW kernel
(one launch per step), the default foreach path, and gradient clipping."""
import pytest
import torch
import torch_neuronx

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}
# Reduced-precision fused Adam computes in float and rounds once, as the CPU does: one unit in
# the last place at the most.
ULP_TOL = {torch.bfloat16: dict(rtol=2**-7, atol=1e-5), torch.float16: dict(rtol=2**-10, atol=1e-6)}


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("options", [dict(), dict(momentum=0.9), dict(momentum=0.9, nesterov=True, weight_decay=0.1),
                                     dict(momentum=0.5, dampening=0.3, maximize=True), dict(lr=torch.tensor(0.02))],
                         ids=["plain", "momentum", "nesterov", "dampening_maximize", "tensor_lr"])
def test_fused_sgd_matches_cpu(dtype, options):
    cpu, dev = twin_params(dtype)
    kw = dict(lr=1e-2)
    kw.update(options)
    # the CPU's own fused SGD leaves most bfloat16 parameters unchanged (torch 2.13), so the
    # reference for bfloat16 is its per-tensor SGD
    cpu_opt = torch.optim.SGD(cpu, fused=dtype == torch.float32, foreach=False if dtype != torch.float32 else None, **kw)
    dev_opt = torch.optim.SGD(dev, fused=True, **kw)
    torch_neuronx.clear_op_tracking()
    run_steps(cpu_opt, dev_opt, cpu, dev)
    torch.neuron.synchronize()
    assert "aten::_fused_sgd_" in torch_neuronx.get_executed_ops()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    for p, d in zip(cpu, dev):
        torch.testing.assert_close(d.detach().cpu(), p.detach(), **TOL[dtype])
    if kw.get("momentum"):
        torch.testing.assert_close(dev_opt.state[dev[0]]["momentum_buffer"].cpu(),
                                   cpu_opt.state[cpu[0]]["momentum_buffer"], **TOL[dtype])


def test_fused_sgd_under_grad_scaler_skips_overflowing_steps():
    """GradScaler hands a fused SGD its scale and found_inf: no sync, and the step after an
    overflow leaves the parameters alone, as on the CPU."""
    cpu, dev = twin_params(torch.float32)
    for params, device in ((cpu, "cpu"), (dev, "neuron")):
        for found in (0.0, 1.0):
            for p in params:
                p.grad = torch.full(p.shape, 4.0, device=device)
            torch._fused_sgd_(params, [p.grad for p in params], [torch.zeros_like(p) for p in params],
                              weight_decay=0.0, momentum=0.9, lr=0.1, dampening=0.0, nesterov=False,
                              maximize=False, is_first_step=True, grad_scale=torch.tensor(2.0, device=device),
                              found_inf=torch.tensor(found, device=device))
    for p, d in zip(cpu, dev):
        torch.testing.assert_close(d.detach().cpu(), p.detach())
        torch.testing.assert_close(d.grad.cpu(), p.grad)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("amsgrad", [False, True])
def test_fused_adam_reduced_precision_blocks_match_cpu(dtype, amsgrad):
    """bf16 / f16 parameters larger than the kernel's block of 512 (and not a multiple of it),
    with a grad scale: weights, moments and the unscaled gradient written back."""
    g = torch.Generator().manual_seed(3)
    cpu = [torch.nn.Parameter(torch.randn(s, generator=g).to(dtype)) for s in [(1300,), (40, 33), (5,)]]
    dev = [torch.nn.Parameter(p.detach().to("neuron")) for p in cpu]
    states = {}
    for params, device in ((cpu, "cpu"), (dev, "neuron")):
        for p in params:
            p.grad = (torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 8).to(dtype).to(device)
        moments = [[torch.rand(p.shape, generator=torch.Generator().manual_seed(k)).to(dtype).to(device) for p in params]
                   for k in range(3)]
        torch._fused_adamw_(params, [p.grad for p in params], moments[0], moments[1], moments[2] if amsgrad else [],
                            [torch.full((), 3.0, device=device) for p in params], lr=0.01, beta1=0.9, beta2=0.999,
                            weight_decay=0.01, eps=1e-8, amsgrad=amsgrad, maximize=False,
                            grad_scale=torch.tensor(4.0, device=device), found_inf=torch.tensor(0.0, device=device))
        states[device] = [t.detach().cpu() for t in (*params, *(p.grad for p in params), *moments[0], *moments[1],
                                                      *(moments[2] if amsgrad else []))]
    for d, c in zip(states["neuron"], states["cpu"]):
        torch.testing.assert_close(d, c, **ULP_TOL[dtype])


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


# --- the _foreach_* ops: one launch per list (csrc/aten/Foreach.cpp)

def twin_lists(dtype, count=4, seed=0):
    """Lists of tensors (one transposed, one empty) on the CPU and on neuron."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(7, 5), (33,), (3, 4), (0,)][:count]
    cpu = [torch.randn(s, generator=g).to(dtype) for s in shapes]
    cpu[2] = cpu[2].t()  # dense, strides permuted: still one launch
    return cpu, [t.to("neuron") for t in cpu]


PER_TENSOR_OPS = {"aten::add.out", "aten::sub.out", "aten::mul.out", "aten::div.out", "aten::sqrt.out",
                  "aten::lerp.Scalar_out", "aten::lerp.Tensor_out", "aten::addcmul.out", "aten::addcdiv.out",
                  "aten::linalg_vector_norm.out", "aten::maximum.out", "aten::minimum.out",
                  "aten::clamp.out"}


def launched(name):
    ops = torch_neuronx.get_executed_ops()
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    assert name in ops, (name, ops)
    assert not PER_TENSOR_OPS & set(ops), ops


FOREACH_CALLS = {
    "add.List": lambda a, b, c, s: torch._foreach_add(a, b, alpha=-0.5),
    "add_.List": lambda a, b, c, s: torch._foreach_add_(a, b, alpha=2),
    "add.Scalar": lambda a, b, c, s: torch._foreach_add(a, 0.25),
    "add_.ScalarList": lambda a, b, c, s: torch._foreach_add_(a, [1, -2.5, 0.5, 3]),
    "add.Tensor": lambda a, b, c, s: torch._foreach_add(a, s, alpha=3),
    "sub_.List": lambda a, b, c, s: torch._foreach_sub_(a, b, alpha=0.5),
    "sub.Scalar": lambda a, b, c, s: torch._foreach_sub(a, 1.5),
    "sub.ScalarList": lambda a, b, c, s: torch._foreach_sub(a, [1.0, 2.0, -3.0, 4.0]),
    "mul_.List": lambda a, b, c, s: torch._foreach_mul_(a, b),
    "mul.Scalar": lambda a, b, c, s: torch._foreach_mul(a, 0.999),
    "mul_.ScalarList": lambda a, b, c, s: torch._foreach_mul_(a, [0.5, 2, True, -1.25]),
    "mul_.Tensor": lambda a, b, c, s: torch._foreach_mul_(a, s),
    "mul.Tensor": lambda a, b, c, s: torch._foreach_mul(a, torch.tensor(0.75)),  # a CPU value
    "div.List": lambda a, b, c, s: torch._foreach_div(a, c),
    "div_.Scalar": lambda a, b, c, s: torch._foreach_div_(a, 1.0013),
    "div.ScalarList": lambda a, b, c, s: torch._foreach_div(a, [2.0, 3.0, 0.5, 7.0]),
    "div_.Tensor": lambda a, b, c, s: torch._foreach_div_(a, s),
    "addcmul_.Scalar": lambda a, b, c, s: torch._foreach_addcmul_(a, b, b, value=-0.001),
    "addcmul.ScalarList": lambda a, b, c, s: torch._foreach_addcmul(a, b, c, [1.0, 2.0, 3.0, 4.0]),
    "addcdiv_.ScalarList": lambda a, b, c, s: torch._foreach_addcdiv_(a, b, c, [-0.01, 0.02, 0.5, 1.0]),
    "addcdiv.Tensor": lambda a, b, c, s: torch._foreach_addcdiv(a, b, c, torch.tensor([0.1, 0.2, 0.3, 0.4])),
    "addcdiv.Scalar": lambda a, b, c, s: torch._foreach_addcdiv(a, b, c, value=2),
    "lerp_.Scalar": lambda a, b, c, s: torch._foreach_lerp_(a, b, 0.1),
    "lerp.List": lambda a, b, c, s: torch._foreach_lerp(a, b, [x.sigmoid() for x in c]),
    "maximum_.List": lambda a, b, c, s: torch._foreach_maximum_(a, b),
    "maximum.Scalar": lambda a, b, c, s: torch._foreach_maximum(a, 0.1),
    "minimum.ScalarList": lambda a, b, c, s: torch._foreach_minimum(a, [0.0, 1, -0.5, 2.0]),
    "clamp_min_.Scalar": lambda a, b, c, s: torch._foreach_clamp_min_(a, -0.25),
    "clamp_max.List": lambda a, b, c, s: torch._foreach_clamp_max(a, b),
    "sqrt": lambda a, b, c, s: torch._foreach_sqrt(c),
    "sqrt_": lambda a, b, c, s: torch._foreach_sqrt_(c),
    "exp": lambda a, b, c, s: torch._foreach_exp(a),
    "neg_": lambda a, b, c, s: torch._foreach_neg_(a),
    "abs": lambda a, b, c, s: torch._foreach_abs(a),
    "reciprocal": lambda a, b, c, s: torch._foreach_reciprocal(c),
    "sigmoid_": lambda a, b, c, s: torch._foreach_sigmoid_(a),
    "tanh": lambda a, b, c, s: torch._foreach_tanh(a),
    "expm1_": lambda a, b, c, s: torch._foreach_expm1_(a),
    "log": lambda a, b, c, s: torch._foreach_log(c),
    "log1p_": lambda a, b, c, s: torch._foreach_log1p_(c),
    "rsqrt": lambda a, b, c, s: torch._foreach_rsqrt(c),
    "sin": lambda a, b, c, s: torch._foreach_sin(a),
    "cos_": lambda a, b, c, s: torch._foreach_cos_(a),
    "erf": lambda a, b, c, s: torch._foreach_erf(a),
    "floor_": lambda a, b, c, s: torch._foreach_floor_(a),
    "ceil": lambda a, b, c, s: torch._foreach_ceil(torch._foreach_mul(a, 3)),
    "round": lambda a, b, c, s: torch._foreach_round(torch._foreach_mul(a, 3)),
    "trunc_": lambda a, b, c, s: torch._foreach_trunc_(a),
    "sign": lambda a, b, c, s: torch._foreach_sign(a),
    "pow.List": lambda a, b, c, s: torch._foreach_pow(c, b),
    "pow_.Scalar": lambda a, b, c, s: torch._foreach_pow_(a, 2),  # x * x, as the per-tensor pow
    "pow.Scalar": lambda a, b, c, s: torch._foreach_pow(c, -1.5),
    "pow.ScalarList": lambda a, b, c, s: torch._foreach_pow(c, [3, 0.5, -1, 1.5]),
    "lerp_.ScalarList": lambda a, b, c, s: torch._foreach_lerp_(a, b, [0.1, 0.9, -0.5, 0.5]),
    "zero_": lambda a, b, c, s: torch._foreach_zero_(a),
    "copy_": lambda a, b, c, s: torch._foreach_copy_(a, b),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("call", sorted(FOREACH_CALLS))
def test_foreach_ops_match_cpu_in_one_launch(call, dtype):
    (a, ad), (b, bd), (c, cd) = (twin_lists(dtype, seed=k) for k in range(3))
    c, cd = [x.abs() + 0.5 for x in c], [x.abs() + 0.5 for x in cd]  # divisors and square roots
    s, sd = torch.tensor(1.5, dtype=dtype), torch.tensor(1.5, dtype=dtype, device="neuron")
    torch_neuronx.clear_op_tracking()
    want = FOREACH_CALLS[call](a, b, c, s)
    got = FOREACH_CALLS[call](ad, bd, cd, sd)
    launched("aten::_foreach_" + call)
    if got is None:  # in place: the first list (the third for sqrt_ and log1p_) was updated
        want, got = (c, cd) if call in ("sqrt_", "log1p_") else (a, ad)
    assert len(got) == len(want)
    for w, x in zip(want, got):
        assert x.device.type == "neuron" and x.dtype == w.dtype and x.stride() == w.stride()
        torch.testing.assert_close(x.cpu(), w, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("ord", [1, 2, float("inf")], ids=str)
def test_foreach_norm_matches_cpu(ord, dtype):
    a, ad = twin_lists(dtype, count=3)
    big = torch.randn(100_000).to(dtype)  # several kernel threads add partial norms
    a, ad = a + [big], ad + [big.to("neuron")]
    torch_neuronx.clear_op_tracking()
    got = torch._foreach_norm(ad, ord)
    launched("aten::_foreach_norm.Scalar")
    for w, x in zip(torch._foreach_norm(a, ord), got):
        assert x.shape == () and x.dtype == dtype
        torch.testing.assert_close(x.cpu(), w, **TOL[dtype])
    nan = [torch.tensor([1.0, float("nan")]), torch.ones(3)]
    torch.testing.assert_close([x.cpu() for x in torch._foreach_norm([t.to("neuron") for t in nan], ord)],
                               torch._foreach_norm(nan, ord), equal_nan=True)


def test_foreach_steps_match_the_per_tensor_route_exactly():
    """AdamW (foreach by default on neuron), SGD and clip_grad_norm_: the lists' launches give
    the values the per-tensor ops give, bit for bit."""
    for cls, kw in ((torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
                    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01))):
        results = []
        for foreach in (True, False):
            _, params = twin_params(torch.bfloat16)
            params = [torch.nn.Parameter(p.detach().clone()) for p in params]
            opt = cls(params, foreach=foreach, **kw)
            g = torch.Generator().manual_seed(1)
            torch_neuronx.clear_op_tracking()
            for _ in range(3):
                for p in params:
                    p.grad = torch.randn(p.shape, generator=g).to(p.dtype).to("neuron")
                torch.nn.utils.clip_grad_norm_(params, 0.5, foreach=foreach)
                opt.step()
            ops = torch_neuronx.get_executed_ops()
            if foreach:
                assert "aten::_foreach_norm.Scalar" in ops and not {"aten::addcdiv.out", "aten::lerp.Scalar_out"} & set(ops)
            results.append([p.detach().cpu() for p in params])
        for x, y in zip(*results):
            assert torch.equal(x, y), cls


def test_foreach_lists_outside_the_launch_take_the_per_tensor_route():
    a, ad = twin_lists(torch.float32)
    cases = {
        "mixed dtypes": lambda l: [l[0].double()] + l[1:],
        "a strided view": lambda l: [l[0][:, ::2]] + l[1:],
        "integers": lambda l: [(x * 10).long() for x in l],
    }
    for name, make in cases.items():
        torch_neuronx.clear_op_tracking()
        got = torch._foreach_mul(make(ad), 1.5)
        assert "aten::_foreach_mul.Scalar" not in torch_neuronx.get_executed_ops(), name
        for w, x in zip(torch._foreach_mul(make(a), 1.5), got):
            torch.testing.assert_close(x.cpu(), w)
    # errors are PyTorch's own, from its per-tensor route
    for bad in (lambda l, m: torch._foreach_add(l, m[:2]), lambda l, m: torch._foreach_mul(l, [1.0]),
                lambda l, m: torch._foreach_norm(l + [l[0].new_empty(0)], float("inf")),
                lambda l, m: torch._foreach_add(l, l[0][:1].reshape(1, 1))):
        with pytest.raises(Exception) as cpu_error:
            bad(a, a)
        with pytest.raises(type(cpu_error.value)):
            bad(ad, ad)


def test_foreach_pow_mixing_squares_and_copy_between_dtypes():
    a, ad = twin_lists(torch.float32)
    torch_neuronx.clear_op_tracking()
    got = torch._foreach_pow(ad, [2, 3, 2, 1])  # squares (x * x) among others: per tensor
    assert "aten::_foreach_pow.ScalarList" not in torch_neuronx.get_executed_ops()
    for w, x in zip(torch._foreach_pow(a, [2, 3, 2, 1]), got):
        torch.testing.assert_close(x.cpu(), w)
    for src_dtype, dst_dtype in ((torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32),
                                 (torch.float32, torch.int32), (torch.int64, torch.float16)):
        src = [(x * 10).to(src_dtype) for x in a]
        dst, dst_d = [torch.empty_like(x, dtype=dst_dtype) for x in src], [torch.empty_like(x, dtype=dst_dtype, device="neuron") for x in src]
        torch_neuronx.clear_op_tracking()
        torch._foreach_copy_(dst_d, [x.to("neuron") for x in src])
        launched("aten::_foreach_copy_")
        torch._foreach_copy_(dst, src)
        for w, x in zip(dst, dst_d):
            torch.testing.assert_close(x.cpu(), w, rtol=0, atol=0)
    # a source that partly overlaps its destination: per tensor, which refuses it as the CPU does
    for device in ("cpu", "neuron"):
        base = torch.arange(8.0, device=device)
        with pytest.raises(RuntimeError, match="single memory location"):
            torch._foreach_copy_([base[:4]], [base[2:6]])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_amp_unscale_and_scale_update_match_cpu(dtype):
    """GradScaler's two ops: the unscale over a gradient list (one launch, found_inf set by an
    inf or a NaN in any tensor) and the scale update, against the CPU's kernels."""
    for bad in (None, float("inf"), float("nan")):
        grads, grads_d = twin_lists(dtype)
        if bad is not None:
            grads[1][-1] = bad
            grads_d[1][-1] = bad
        state = {}
        for device, gl in (("cpu", grads), ("neuron", grads_d)):
            found = torch.zeros(1, device=device)
            scale, tracker = torch.full((1,), 65536.0, device=device), torch.full((1,), 1, dtype=torch.int32, device=device)
            torch_neuronx.clear_op_tracking()
            torch._amp_foreach_non_finite_check_and_unscale_(gl, found, torch.full((1,), 1 / 3, device=device))
            torch._amp_update_scale_(scale, tracker, found, 2.0, 0.5, 2)
            state[device] = (found, scale, tracker)
        ops = torch_neuronx.get_executed_ops()
        assert {"aten::_amp_foreach_non_finite_check_and_unscale_", "aten::_amp_update_scale_"} <= set(ops), ops
        assert torch_neuronx.get_fallback_ops() == {}
        for w, x in zip(state["cpu"], state["neuron"]):
            torch.testing.assert_close(x.cpu(), w, rtol=0, atol=0)
        for w, x in zip(grads, grads_d):
            torch.testing.assert_close(x.cpu(), w, rtol=0, atol=0, equal_nan=True)
    # scalars of the wrong kind: the CPU kernels' errors, raised without the CPU
    g = [torch.ones(3, device="neuron")]
    torch_neuronx.clear_op_tracking()
    with pytest.raises(RuntimeError, match="found_inf must be a 1-element tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(g, torch.zeros(2, device="neuron"), torch.ones(1, device="neuron"))
    with pytest.raises(RuntimeError, match="growth_tracker must be an int tensor"):
        torch._amp_update_scale_(torch.ones(1, device="neuron"), torch.zeros(1, device="neuron"),
                                 torch.zeros(1, device="neuron"), 2.0, 0.5, 2)
    assert torch_neuronx.get_fallback_ops() == {}


def test_grad_scaler_training_matches_cpu():
    """torch.amp.GradScaler("neuron") around a float32 model: scale, unscale before clipping,
    a skipped step after an overflow, and the scale's growth, as on the CPU."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    twins = {"cpu": model, "neuron": __import__("copy").deepcopy(model).to("neuron")}
    opts = {d: torch.optim.SGD(m.parameters(), lr=0.1) for d, m in twins.items()}
    scalers = {d: torch.amp.GradScaler(d, init_scale=2.0 ** 10, growth_interval=2) for d in twins}
    g = torch.Generator().manual_seed(3)
    torch_neuronx.clear_op_tracking()
    for step in range(5):
        x, y = torch.randn(4, 6, generator=g), torch.randn(4, 1, generator=g)
        if step == 2:
            x[0, 0] = float("inf")  # an overflowing step: skipped, and the scale backs off
        for d in twins:
            loss = torch.nn.functional.mse_loss(twins[d](x.to(d)), y.to(d))
            opts[d].zero_grad()
            scalers[d].scale(loss).backward()
            scalers[d].unscale_(opts[d])
            torch.nn.utils.clip_grad_norm_(twins[d].parameters(), 1.0)
            scalers[d].step(opts[d])
            scalers[d].update()
        assert scalers["neuron"].get_scale() == scalers["cpu"].get_scale(), step
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    for p, q in zip(twins["cpu"].parameters(), twins["neuron"].parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach())


def test_foreach_maximum_and_clamps_propagate_nan_as_cpu():
    nan = float("nan")
    a = [torch.tensor([1.0, nan, 2.0, nan]), torch.tensor([nan, 0.5])]
    b = [torch.tensor([nan, 1.0, 3.0, nan]), torch.tensor([0.0, 1.0])]
    calls = [lambda x, y: torch._foreach_maximum(x, y), lambda x, y: torch._foreach_minimum(x, y),
             lambda x, y: torch._foreach_clamp_min(x, nan), lambda x, y: torch._foreach_clamp_max(x, 1.5)]
    for call in calls:
        torch_neuronx.clear_op_tracking()
        got = call([t.to("neuron") for t in a], [t.to("neuron") for t in b])
        assert not {"aten::maximum.out", "aten::minimum.out"} & set(torch_neuronx.get_executed_ops())
        for w, x in zip(call(a, b), got):
            torch.testing.assert_close(x.cpu(), w, equal_nan=True)
