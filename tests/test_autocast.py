"""torch.autocast(device_type="neuron") follows the bf16/fp16 policy."""
import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_autocast_lowers_matmul_and_keeps_fp32_ops(dtype, quiet_fallback):
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    da, db = a.to("neuron"), b.to("neuron")
    with torch.autocast(device_type="neuron", dtype=dtype):
        mm = torch.mm(da, db)
        lin = torch.nn.functional.linear(da, db.t())
        sm = torch.softmax(mm, dim=-1)
        assert torch.is_autocast_enabled("neuron")
    assert mm.dtype == dtype and lin.dtype == dtype
    assert sm.dtype == torch.float32
    with torch.autocast(device_type="cpu", dtype=dtype):
        ref = torch.mm(a, b)
    tol = {torch.bfloat16: 2e-2, torch.float16: 2e-3}[dtype]
    torch.testing.assert_close(mm.cpu().float(), ref.float(), rtol=tol, atol=tol * 4)


def test_amp_dtypes_are_advertised():
    assert torch.amp.is_autocast_available("neuron")
    with torch.autocast(device_type="neuron"):
        assert torch.get_autocast_dtype("neuron") in (torch.bfloat16, torch.float16)
