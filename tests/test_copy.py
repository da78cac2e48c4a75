"""Copies between CPU and neuron, and between neuron cores: every dtype, any layout."""
import pytest
import torch

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8,
          torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128]


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 100).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -1000), min(info.max, 1000), shape, generator=g, dtype=dtype)


LAYOUTS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.transpose(0, 1),
    "strided": lambda t: t[::2, 1::3],
    "offset": lambda t: t[3:, 2:],
    "expanded": lambda t: t[:1].expand(5, -1),
    "scalar": lambda t: t[1, 2],
    "empty": lambda t: t[:0],
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_round_trip(dtype, layout):
    base = sample((9, 12), dtype)
    src = LAYOUTS[layout](base)
    dev = src.to("neuron")
    assert dev.device.type == "neuron" and dev.dtype == dtype and dev.shape == src.shape
    back = dev.cpu()
    torch.testing.assert_close(back, src, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["transposed", "strided", "offset"])
def test_copy_into_device_views(dtype, layout):
    """copy_ from CPU into a non-contiguous view of a device tensor, and back into a CPU view."""
    target = torch.zeros(9, 12, dtype=dtype)
    dev = target.to("neuron")
    src = sample((9, 12), dtype, seed=1)
    LAYOUTS[layout](dev).copy_(LAYOUTS[layout](src))
    LAYOUTS[layout](target).copy_(LAYOUTS[layout](src))
    torch.testing.assert_close(dev.cpu(), target, rtol=0, atol=0)
    out = torch.full((12, 9), 7, dtype=dtype).t()
    out.copy_(dev)
    torch.testing.assert_close(out, target, rtol=0, atol=0)


@pytest.mark.parametrize("src_dtype", DTYPES[:10], ids=str)
@pytest.mark.parametrize("dst_dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool], ids=str)
def test_dtype_conversion_matches_cpu(src_dtype, dst_dtype):
    src = sample((6, 7), src_dtype)
    expect = src.to(dst_dtype)
    torch.testing.assert_close(src.to("neuron").to(dst_dtype).cpu(), expect, rtol=0, atol=0)
    torch.testing.assert_close(src.to("neuron", dtype=dst_dtype).cpu(), expect, rtol=0, atol=0)
    torch.testing.assert_close(src.to("neuron").to("cpu", dtype=dst_dtype), expect, rtol=0, atol=0)


@pytest.mark.parametrize("src_dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("dst_dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
                                       torch.float32], ids=str)
def test_out_of_range_conversions_match_cpu(src_dtype, dst_dtype):
    """NaN, infinities and values past the target's range convert as the CPU converts them
    (a float goes to int32 and narrower through one x86 conversion: INT32_MIN when out of
    range; integers wrap)."""
    values = [float("nan"), float("inf"), -float("inf"), 3.7, -3.7, 1e20, 2.0 ** 31, -2.0 ** 31 - 1, 3e9, 300.0,
              -129.5, 70000.0]
    if src_dtype == torch.int64:
        values = [2 ** 62 + 300, -5, 70000, 255, 256, -2 ** 31 - 7, 2 ** 53 + 1]
    src = torch.tensor(values).to(src_dtype)
    torch.testing.assert_close(src.to("neuron").to(dst_dtype).cpu(), src.to(dst_dtype), rtol=0, atol=0, equal_nan=True)


def test_device_to_device():
    src = sample((33, 17), torch.float32)
    a = src.to("neuron:0")
    b = a.to("neuron:1")
    assert b.device == torch.device("neuron", 1)
    c = torch.empty(17, 33, device="neuron:0")
    c.copy_(b.t())
    torch.testing.assert_close(c.cpu(), src.t(), rtol=0, atol=0)
    d = a.clone()
    a.fill_(0)
    torch.testing.assert_close(d.cpu(), src, rtol=0, atol=0)


def test_non_blocking_pinned_copies():
    src = sample((256, 256), torch.float32).pin_memory()
    assert src.is_pinned()
    dev = src.to("neuron", non_blocking=True)
    out = torch.empty(256, 256).pin_memory()
    out.copy_(dev, non_blocking=True)
    torch.neuron.synchronize()
    torch.testing.assert_close(out, src, rtol=0, atol=0)
    del src  # freeing pinned memory with copies pending is safe
    torch.neuron.synchronize()


def test_pageable_source_may_change_after_copy():
    src = torch.arange(1_000_000, dtype=torch.float32)
    expect = src.clone()
    dev = src.to("neuron")   # staged: returns before the device copy runs
    src.zero_()
    torch.testing.assert_close(dev.cpu(), expect, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_item_fill_zero(dtype):
    value = {torch.bool: True}.get(dtype, 3) if not dtype.is_complex else 2 + 1j
    t = torch.empty(4, 5, dtype=dtype, device="neuron")
    t.fill_(value)
    torch.testing.assert_close(t.cpu(), torch.full((4, 5), value, dtype=dtype), rtol=0, atol=0)
    assert t[1, 2].item() == torch.tensor(value, dtype=dtype).item()
    t[1].zero_()
    expect = torch.full((4, 5), value, dtype=dtype)
    expect[1] = 0
    torch.testing.assert_close(t.cpu(), expect, rtol=0, atol=0)
    t.fill_(torch.tensor(value, dtype=dtype, device="neuron"))
    assert bool((t.cpu() == torch.tensor(value, dtype=dtype)).all())


def test_resize_keeps_data():
    t = torch.arange(6, dtype=torch.float32, device="neuron")
    t.resize_(2, 5)
    assert t.shape == (2, 5)
    torch.testing.assert_close(t.flatten()[:6].cpu(), torch.arange(6, dtype=torch.float32))
    s = torch.arange(4, dtype=torch.int32, device="neuron").untyped_storage()
    s.resize_(64)
    assert s.nbytes() == 64
    torch.testing.assert_close(torch.tensor([], dtype=torch.int32, device="neuron").set_(s)[:4].cpu(),
                               torch.arange(4, dtype=torch.int32))


def test_views_share_storage():
    t = torch.zeros(4, 6, device="neuron")
    v = t.view(6, 4)[1:3]
    v.fill_(5)
    expect = torch.zeros(4, 6)
    expect.view(6, 4)[1:3] = 5
    torch.testing.assert_close(t.cpu(), expect)
    assert t.as_strided((2, 2), (1, 6), 1).cpu().tolist() == expect.as_strided((2, 2), (1, 6), 1).tolist()


def test_unsupported_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="not supported on the neuron device"):
        torch.zeros(3, dtype=torch.uint16).to("neuron").cpu()


FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2]


def float8_probe_floats():
    """Floats that reach every float8 rounding case: a sweep over the whole float32 range
    (every 4099th bit pattern), every bfloat16 and float16 value, each float8 value and the
    midpoints to its neighbours (ties to even), the overflow edges, infinities and NaN."""
    sweep = torch.arange(0, 2 ** 32, 4099, dtype=torch.int64).to(torch.int32).view(torch.float32)
    bf16 = torch.arange(-2 ** 15, 2 ** 15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
    f16 = torch.arange(-2 ** 15, 2 ** 15, dtype=torch.int32).to(torch.int16).view(torch.float16).float()
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    grid = torch.cat([codes.view(d).float() for d in FLOAT8]).sort().values
    grid = grid[torch.isfinite(grid)]
    mids = (grid[1:] + grid[:-1]) / 2
    edges = torch.tensor([448.0, 449.0, 464.0, 464.01, 479.99, 480.0, 57344.0, 61439.0, 61440.0, 65535.0, 65536.0,
                          1e30, float("inf"), float("nan"), 2 ** -6, 2 ** -9, 2 ** -10, 2 ** -14, 2 ** -16,
                          2 ** -17, 1.5 * 2 ** -17, 0.0])
    out = torch.cat([sweep, bf16, f16, grid, mids, torch.nextafter(mids, grid[1:]), edges])
    return torch.cat([out, -out])


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
@pytest.mark.parametrize("src_dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64], ids=str)
def test_float8_from_floats_is_bit_exact(dtype, src_dtype):
    src = float8_probe_floats().to(src_dtype)
    got = src.to("neuron").to(dtype).cpu()
    assert got.dtype == dtype
    torch.testing.assert_close(got.view(torch.uint8), src.to(dtype).view(torch.uint8), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
@pytest.mark.parametrize("dst_dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64,
                                       torch.int32, torch.uint8, torch.bool], ids=str)
def test_float8_to_other_dtypes_matches_cpu(dtype, dst_dtype):
    """Every float8 code, compared as bits for the floats: NaN payloads included, except in
    bfloat16, whose NaN the CPU writes differently by source dtype (0x7fc0 from float16 and
    float8, 0xffff from float32 and float64), so there NaN only has to be NaN."""
    src = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)
    got, expect = src.to("neuron").to(dst_dtype).cpu(), src.to(dst_dtype)
    if dst_dtype == torch.bfloat16:
        torch.testing.assert_close(got, expect, rtol=0, atol=0, equal_nan=True)
        return
    if dst_dtype.is_floating_point:
        bits = {8: torch.int64, 4: torch.int32, 2: torch.int16}[dst_dtype.itemsize]
        got, expect = got.view(bits), expect.view(bits)
    torch.testing.assert_close(got, expect, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "expanded"])
def test_float8_storage_round_trips(dtype, layout):
    src = LAYOUTS[layout](torch.randn(9, 12, generator=torch.Generator().manual_seed(0)).to(dtype))
    dev = src.to("neuron")
    assert dev.dtype == dtype and dev.element_size() == 1
    assert torch.equal(dev.cpu().view(torch.uint8), src.view(torch.uint8))
    # float8 -> float8 of the other kind goes through float32, as on the CPU
    other = FLOAT8[1 - FLOAT8.index(dtype)]
    assert torch.equal(dev.to(other).cpu().view(torch.uint8), src.to(other).view(torch.uint8))


def test_float8_ops_the_cpu_lacks_raise_its_error():
    """Arithmetic on float8 is what the CPU supports, with its errors (only copies are native)."""
    x = torch.ones(4, dtype=torch.float8_e4m3fn)
    with pytest.raises(Exception) as cpu:
        x + x
    with pytest.raises(type(cpu.value), match="Float8_e4m3fn"):
        x.to("neuron") + x.to("neuron")


def test_overlapping_writes_are_refused_like_on_cpu():
    for dev in ("cpu", "neuron"):
        x = torch.arange(8.0, device=dev)
        with pytest.raises(RuntimeError, match="single memory location"):
            x[1:].copy_(x[:-1])
        filled = torch.zeros(1, device=dev)
        filled.expand(3).fill_(1.0)      # allowed: every alias gets the same value
        assert filled.item() == 1.0
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            torch.zeros(1, device=dev).expand(3).normal_()
    y = torch.arange(8.0, device="neuron")
    y[4:].copy_(y[:4])      # disjoint halves of one tensor are fine
    assert y.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.uint8, torch.bool],
                         ids=str)
def test_transposed_copies_match_cpu(dtype):
    """Copies whose source has its last two dimensions swapped go by tiles: whole and partial
    tiles, a batch, a slice of a larger tensor, and out of a transposed view into one."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 70, 133, generator=g) * 50).to(dtype)
    d = x.to("neuron")
    for fn in (lambda t: t.transpose(-1, -2).contiguous(), lambda t: t[1].t().contiguous(),
               lambda t: t[:, 5:60, 7:100].transpose(1, 2).contiguous(), lambda t: t.permute(2, 0, 1).contiguous()):
        torch.testing.assert_close(fn(d).cpu(), fn(x), rtol=0, atol=0)
    out = torch.empty(3, 133, 70, dtype=dtype, device="neuron")
    out.copy_(d.transpose(1, 2))
    torch.testing.assert_close(out.cpu(), x.transpose(1, 2).contiguous(), rtol=0, atol=0)
