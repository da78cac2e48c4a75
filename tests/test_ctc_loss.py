"""The CTC loss (wav2vec2/HuBERT fine-tuning) on neuron against the CPU: padded and
concatenated targets, repeated labels (where a path must pass a blank), empty targets, inputs
too short for their target (inf, or 0 with zero_infinity), every reduction, float32 and
float64, gradients, and the CPU's errors."""
import pytest
import torch
import torch_neuronx
import torch.nn.functional as F

G = torch.Generator().manual_seed(0)


def batch(T=12, B=4, C=6, S=5, dtype=torch.float32):
    log_probs = torch.randn(T, B, C, generator=G, dtype=dtype).log_softmax(2)
    targets = torch.randint(1, C, (B, S), generator=G)
    targets[0, 1] = targets[0, 0]  # a repeated label
    input_lengths = torch.tensor([T, T - 1, 4, 1])[:B]
    target_lengths = torch.tensor([S, 3, 0, 2])[:B]  # an empty target, and one no alignment fits
    return log_probs, targets, input_lengths, target_lengths


def run(device, log_probs, targets, input_lengths, target_lengths, **kw):
    lp = log_probs.detach().to(device).requires_grad_()
    loss = F.ctc_loss(lp, targets.to(device), input_lengths.to(device), target_lengths.to(device), **kw)
    (loss * torch.arange(1, loss.numel() + 1, dtype=loss.dtype, device=device).reshape(loss.shape)).sum().backward()
    return loss.detach().cpu(), lp.grad.cpu()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("layout", ["padded", "concatenated", "int32"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_cpu(reduction, zero_infinity, layout, dtype):
    log_probs, targets, il, tl = batch(dtype=dtype)
    if layout == "concatenated":
        targets = torch.cat([targets[b, :tl[b]] for b in range(len(tl))])
    elif layout == "int32":
        targets = targets.int()
    kw = dict(reduction=reduction, zero_infinity=zero_infinity, blank=0)
    expect_loss, expect_grad = run("cpu", log_probs, targets, il, tl, **kw)
    torch_neuronx.clear_op_tracking()
    loss, grad = run("neuron", log_probs, targets, il, tl, **kw)
    assert torch_neuronx.get_fallback_ops() == {}, torch_neuronx.get_fallback_ops()
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(loss, expect_loss, equal_nan=True, **tol)
    torch.testing.assert_close(grad, expect_grad, equal_nan=True, **tol)


def test_nonzero_blank_unbatched_and_strided_input():
    logits = torch.randn(7, 5, 20, generator=G)
    log_probs = logits.log_softmax(2)[:, :, ::4]  # 5 classes, strided; the blank is the last
    targets = torch.randint(0, 4, (5, 3), generator=G)
    il, tl = torch.full((5,), 7), torch.tensor([3, 2, 3, 1, 0])
    for case in (
        (log_probs, targets, il, tl),
        (log_probs[:, 1], targets[1, :2], il[1], tl[1]),  # unbatched
    ):
        expect = run("cpu", *case, blank=4)
        got = run("neuron", *case, blank=4)
        for g, e in zip(got, expect):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def test_long_sequence_at_least_as_accurate_as_cpu():
    """400 frames: the CPU's float32 recurrences drift (its gradient is 4e-4 off the float64
    result here); neuron's run in double and store float32, 6e-5 off. Both are judged against
    the CPU in float64, and neuron must be the closer."""
    log_probs = torch.randn(400, 2, 30, generator=G).log_softmax(2)
    targets = torch.randint(1, 30, (2, 60), generator=G)
    il, tl = torch.tensor([400, 350]), torch.tensor([60, 45])
    exact = run("cpu", log_probs.double(), targets, il, tl, reduction="sum")
    cpu = run("cpu", log_probs, targets, il, tl, reduction="sum")
    got = run("neuron", log_probs, targets, il, tl, reduction="sum")
    for g, c, e in zip(got, cpu, exact):
        assert (g.double() - e).abs().max() <= (c.double() - e).abs().max()
        torch.testing.assert_close(g.double(), e, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bad", [
    lambda lp, t: torch.ops.aten._ctc_loss(lp, t, [13, 12, 4, 1], [5, 3, 0, 2]),   # input longer than T
    lambda lp, t: torch.ops.aten._ctc_loss(lp, t, [-1, 12, 4, 1], [5, 3, 0, 2]),
    lambda lp, t: torch.ops.aten._ctc_loss(lp, t, [12, 12, 4, 1], [6, 3, 0, 2]),   # target longer than S
    lambda lp, t: torch.ops.aten._ctc_loss(lp, t, [12, 12, 4, 1], [5, 3, 0, 2], 6),  # blank out of range
    lambda lp, t: torch.ops.aten._ctc_loss(lp, t, [12, 12, 4], [5, 3, 0, 2]),
    lambda lp, t: torch.ops.aten._ctc_loss(lp, t.flatten()[:9], [12, 12, 4, 1], [5, 3, 0, 2]),
    lambda lp, t: torch.ops.aten._ctc_loss(lp.to(torch.bfloat16), t, [12, 12, 4, 1], [5, 3, 0, 2]),
])
def test_errors_match_cpu(bad, quiet_fallback):
    log_probs, targets, _, _ = batch()
    with pytest.raises(Exception) as cpu_error:
        bad(log_probs, targets)
    with pytest.raises(cpu_error.type):
        bad(log_probs.to("neuron"), targets.to("neuron"))


def test_label_out_of_range_is_an_index_error():
    log_probs, targets, il, tl = batch()
    targets[1, 2] = 6  # C = 6 classes: labels are 0..5
    with pytest.raises(IndexError, match="target label 6 of batch element 1 is out of range for 6 classes"):
        F.ctc_loss(log_probs.to("neuron"), targets.to("neuron"), il, tl)
