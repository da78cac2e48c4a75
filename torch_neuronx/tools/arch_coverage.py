"""Which Hugging Face causal-LM architectures run on neuron exactly as on the CPU.

    python -m torch_neuronx.tools.arch_coverage                    # every causal-LM model type
    python -m torch_neuronx.tools.arch_coverage --subset ci        # the CI subset
    python -m torch_neuronx.tools.arch_coverage --arch llama,gpt2  # chosen model types
        [--out arch_coverage.md] [--json [FILE]] [--timeout 300] [--in-process] [--cpu-only]
        [--experts-implementation eager]          # MoE experts path other than transformers' default

For each model type of `MODEL_FOR_CAUSAL_LM_MAPPING_NAMES` a tiny random model is built offline
from the config class defaults, shrunk by `tiny_configs` (hidden 64, 2 layers, 4 heads / 2 KV heads, intermediate
128, vocabulary 512, 4 experts ...). With a fixed seed it is built on the CPU in float32, a copy
is moved to neuron, and both run a forward pass on a fixed batch (2 rows of 12 tokens, the second
left-padded by 4 under an attention mask) and a greedy `generate(max_new_tokens=8)`. An
architecture passes when the logits agree (rtol = atol = 1e-4, compared at the positions the mask
keeps) and the generated tokens are identical. The aten ops that fell back to the CPU on neuron
are recorded for each.

Each architecture runs in its own interpreter (`--in-process` to run them in this one) with a
time limit, so that a crash, a hang or leftover state in one cannot touch the others.

A result is "skip" when the architecture cannot be judged here: it needs inputs other than token
ids (audio codebooks, ...), or the CPU reference itself fails to build or run with a tiny
config. Skips are listed with their reasons and left out of the pass percentage.
"""
import argparse
import copy
import json
import math
import os
import subprocess
import sys
import time
import traceback
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

import torch_neuronx  # noqa: E402

from torch_neuronx.tools.tiny_configs import (  # noqa: E402
    HEADS, HIDDEN, KV_HEADS, LAYERS, MODEL_SETUP, SEED, VOCAB, Skip, tiny_config)

# ------------------------------------------------------------------------------------------
# The test batch and the run.

BATCH, SEQ, LEFT_PAD, NEW_TOKENS = 2, 12, 4, 8
RTOL = ATOL = 1e-4
DEFAULT_TIMEOUT = 300

CI_SUBSET = ["llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "gpt2",
             "gpt_neox", "opt", "falcon", "mixtral", "qwen2_moe"]
SUBSETS = {"ci": CI_SUBSET}

_FALLBACK_WARNING = ".*has no native neuron kernel.*"

# ------------------------------------------------------------------------------------------
# The comparison


def _text_config(cfg):
    try:
        return cfg.get_text_config(decoder=True)
    except Exception:  # noqa: BLE001 - old-style configs
        return cfg


def make_inputs(cfg):
    """The fixed batch: BATCH rows of SEQ token ids; the last row left-padded by LEFT_PAD."""
    text = _text_config(cfg)
    vocab = getattr(text, "vocab_size", None) or VOCAB
    pad = getattr(text, "pad_token_id", None)
    if not isinstance(pad, int) or not 0 <= pad < vocab:
        pad = 0
    special = set()
    for name in dir(text):
        if name.endswith("_token_id"):
            value = getattr(text, name, None)
            for v in (value if isinstance(value, (list, tuple)) else [value]):
                if isinstance(v, int):
                    special.add(v)
    g = torch.Generator().manual_seed(SEED)
    ids = torch.randint(3, vocab, (BATCH, SEQ), generator=g)
    for s in special:  # keep special tokens out of the prompt
        alt = (s + 7) % (vocab - 3) + 3
        ids[ids == s] = alt if alt not in special else 5
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    ids[-1, :LEFT_PAD] = pad
    mask[-1, :LEFT_PAD] = 0
    return ids, mask, pad


def _first_line(exc):
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip().rstrip(":")


def _logits(output):
    return output.logits if hasattr(output, "logits") else output[0]


def _max_abs_diff(a, b):
    a, b = a.double(), b.double()
    both_nan = torch.isnan(a) & torch.isnan(b)
    diff = (a - b).abs()
    diff[both_nan] = 0
    diff[torch.isnan(diff)] = math.inf
    return diff.max().item() if diff.numel() else 0.0


def _generate(model, ids, mask, pad, device):
    from transformers import GenerationConfig

    gen = GenerationConfig(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                           num_beams=1, pad_token_id=pad)
    eos = getattr(model.generation_config, "eos_token_id", None)
    if eos is not None:
        gen.eos_token_id = eos
    out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=gen)
    if not torch.is_tensor(out):
        out = out.sequences
    return out.cpu()


def check_arch(model_type, cpu_only=False, experts=None):
    """Builds the tiny `model_type`, runs it on the CPU and on neuron and compares. Returns
    {"arch", "status" (pass/fail/skip), "reason", "fallback_ops", "max_abs_diff", "params",
    "seconds"}. Never raises for a problem of the architecture. `experts` picks transformers'
    experts_implementation for MoE models (default: transformers' own choice)."""
    start = time.time()
    result = {"arch": model_type, "status": "skip", "reason": "", "fallback_ops": {},
              "max_abs_diff": None, "params": None, "seconds": 0.0}
    stage = "config"
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_FALLBACK_WARNING)
            warnings.filterwarnings("ignore", category=FutureWarning)
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            _check(model_type, result, cpu_only, experts)
    except Skip as exc:
        result.update(status="skip", reason=str(exc))
    except _Stage as exc:
        stage, exc = exc.stage, exc.__cause__
        if stage.startswith("cpu"):
            result.update(status="skip", reason=f"CPU reference fails ({stage}): {_first_line(exc)}")
        else:
            result.update(status="fail", reason=f"{stage}: {_first_line(exc)}")
        result["traceback"] = "".join(traceback.format_exception(exc))[-4000:]
    finally:
        if not cpu_only and torch.neuron.is_initialized():
            try:
                torch.neuron.synchronize()
            except Exception:  # noqa: BLE001 - the failure is recorded already
                pass
            result["fallback_ops"] = dict(sorted(torch_neuronx.get_fallback_ops().items()))
        result["seconds"] = round(time.time() - start, 2)
    return result


class _Stage(Exception):
    def __init__(self, stage):
        super().__init__(stage)
        self.stage = stage


class _at:
    """`with _at("stage"):` turns an exception into a _Stage naming where it happened."""

    def __init__(self, stage):
        self.stage = stage

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is not None and not isinstance(exc, (Skip, _Stage, KeyboardInterrupt)):
            raise _Stage(self.stage) from exc
        return False


def _check(model_type, result, cpu_only, experts):
    from transformers import AutoModelForCausalLM

    with _at("cpu build"):
        cfg = tiny_config(model_type)
        torch.manual_seed(SEED)
        extra = {"experts_implementation": experts} if experts else {}
        cpu_model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, **extra).eval()
        if model_type in MODEL_SETUP:
            MODEL_SETUP[model_type](cpu_model)
    result["params"] = sum(p.numel() for p in cpu_model.parameters())
    ids, mask, pad = make_inputs(cpu_model.config)
    with _at("cpu forward"), torch.no_grad():
        ref_logits = _logits(cpu_model(input_ids=ids, attention_mask=mask)).float()
    with _at("cpu generate"), torch.no_grad():
        ref_tokens = _generate(cpu_model, ids, mask, pad, "cpu")
    if cpu_only:
        result.update(status="pass", reason="CPU reference only")
        return

    torch.neuron.synchronize()
    torch_neuronx.clear_op_tracking()
    with _at("to neuron"):
        dev_model = copy.deepcopy(cpu_model).to("neuron")
    with _at("neuron forward"), torch.no_grad():
        dev_logits = _logits(dev_model(input_ids=ids.to("neuron"), attention_mask=mask.to("neuron")))
        dev_logits = dev_logits.float().cpu()
    if ref_logits.shape != dev_logits.shape:
        result.update(status="fail", reason=f"logits shape {tuple(dev_logits.shape)} != CPU {tuple(ref_logits.shape)}")
        return
    keep = mask.bool() if ref_logits.dim() == 3 and ref_logits.shape[:2] == mask.shape else None
    ref_cmp = ref_logits[keep] if keep is not None else ref_logits
    dev_cmp = dev_logits[keep] if keep is not None else dev_logits
    result["max_abs_diff"] = _max_abs_diff(ref_cmp, dev_cmp)
    try:
        torch.testing.assert_close(dev_cmp, ref_cmp, rtol=RTOL, atol=ATOL, equal_nan=True)
    except AssertionError:
        result.update(status="fail", reason=f"logits differ: max abs {result['max_abs_diff']:.3g}")
        return
    with _at("neuron generate"), torch.no_grad():
        dev_tokens = _generate(dev_model, ids, mask, pad, "neuron")
    if dev_tokens.shape != ref_tokens.shape or not torch.equal(dev_tokens, ref_tokens):
        result.update(status="fail", reason="tokens differ: " + _token_diff(ref_tokens, dev_tokens))
        return
    result.update(status="pass", reason="")


def _token_diff(ref, dev):
    if ref.shape != dev.shape:
        return f"shape {tuple(dev.shape)} vs CPU {tuple(ref.shape)}"
    rows, cols = torch.nonzero(ref != dev, as_tuple=True)
    r, c = rows[0].item(), cols[0].item()
    return f"row {r} step {c - SEQ}: neuron {dev[r, c].item()} vs CPU {ref[r, c].item()}"


# ------------------------------------------------------------------------------------------
# Running many, each isolated

_RESULT_MARK = "@@ARCH_COVERAGE_RESULT@@"


def run_isolated(model_type, timeout=DEFAULT_TIMEOUT, cpu_only=False, experts=None):
    """check_arch in a fresh interpreter with a time limit; a crash or a hang becomes a fail."""
    cmd = [sys.executable, "-m", "torch_neuronx.tools.arch_coverage", "--worker", model_type]
    if cpu_only:
        cmd.append("--cpu-only")
    if experts:
        cmd += ["--experts-implementation", experts]
    start = time.time()
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"arch": model_type, "status": "fail", "reason": f"timeout after {timeout}s",
                "fallback_ops": {}, "max_abs_diff": None, "params": None,
                "seconds": round(time.time() - start, 2)}
    for line in proc.stdout.splitlines():
        if line.startswith(_RESULT_MARK):
            return json.loads(line[len(_RESULT_MARK):])
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"arch": model_type, "status": "fail",
            "reason": f"worker died (exit {proc.returncode}): {tail[:200]}",
            "fallback_ops": {}, "max_abs_diff": None, "params": None,
            "seconds": round(time.time() - start, 2)}


def all_arches():
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return list(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


# ------------------------------------------------------------------------------------------
# Reporting


def summarize(results):
    passed = [r for r in results if r["status"] == "pass"]
    failed = [r for r in results if r["status"] == "fail"]
    skipped = [r for r in results if r["status"] == "skip"]
    judged = len(passed) + len(failed)
    pct = 100.0 * len(passed) / judged if judged else 0.0
    ops = {}
    for r in passed + failed:
        for op in r.get("fallback_ops", {}):
            ops.setdefault(op, []).append(r["arch"])
    return {"pass": len(passed), "fail": len(failed), "skip": len(skipped), "pass_percent": round(pct, 1),
            "fallback_ops": {op: sorted(a) for op, a in sorted(ops.items(), key=lambda kv: (-len(kv[1]), kv[0]))}}


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _ops_text(ops):
    return ", ".join(f"{name.replace('aten::', '')} x{n}" for name, n in ops.items()) if ops else ""


def environment():
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "torch_neuronx": os.path.dirname(os.path.abspath(torch_neuronx.__file__))}


def render_markdown(results, total_seconds=None, env=None):
    s = summarize(results)
    lines = ["# Causal-LM architecture coverage on neuron", ""]
    if env:
        lines += [", ".join(f"{k} {v}" for k, v in env.items()), ""]
    lines.append(f"Pass: **{s['pass']} / {s['pass'] + s['fail']} ({s['pass_percent']}%)** of the architectures "
                 f"judged; {s['skip']} skipped."
                 + (f" Total time {total_seconds:.0f} s." if total_seconds is not None else ""))
    lines.append("")
    lines.append(f"Tiny random models (hidden {HIDDEN}, {LAYERS} layers, {HEADS} heads / {KV_HEADS} KV heads, "
                 f"vocabulary {VOCAB}), float32, batch {BATCH} x {SEQ} with one row left-padded by {LEFT_PAD}; "
                 f"logits compared with rtol=atol={RTOL:g}, then greedy generate({NEW_TOKENS} tokens) must match.")
    lines.append("")
    lines.append("| architecture | status | reason | max abs diff | CPU-fallback ops | seconds |")
    lines.append("|---|---|---|---|---|---|")
    for r in results:
        if r["status"] == "skip":
            continue
        diff = "" if r.get("max_abs_diff") is None else f"{r['max_abs_diff']:.2g}"
        lines.append(f"| {r['arch']} | {r['status']} | {_cell(r['reason'])} | {diff} | "
                     f"{_cell(_ops_text(r.get('fallback_ops', {})))} | {r['seconds']:.1f} |")
    skipped = [r for r in results if r["status"] == "skip"]
    if skipped:
        lines += ["", "## Skipped", "", "| architecture | reason |", "|---|---|"]
        lines += [f"| {r['arch']} | {_cell(r['reason'])} |" for r in skipped]
    if s["fallback_ops"]:
        lines += ["", "## Ops that fell back to the CPU", "", "| aten op | architectures | which |", "|---|---|---|"]
        lines += [f"| {op} | {len(a)} | {', '.join(a)} |" for op, a in s["fallback_ops"].items()]
    return "\n".join(lines) + "\n"


def render_table(results):
    rows = [("architecture", "status", "reason", "fallback ops")]
    for r in results:
        rows.append((r["arch"], r["status"], r["reason"][:90], _ops_text(r.get("fallback_ops", {}))[:80]))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    out = []
    for row in rows:
        out.append("  ".join(row[i].ljust(widths[i]) for i in range(3)) + "  " + row[3])
    s = summarize(results)
    out.append("")
    out.append(f"pass {s['pass']} / {s['pass'] + s['fail']} judged = {s['pass_percent']}%  (skipped: {s['skip']})")
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_neuronx.tools.arch_coverage",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", help="comma-separated model types (default: every causal-LM model type)")
    parser.add_argument("--subset", choices=sorted(SUBSETS), help="a named subset of model types")
    parser.add_argument("--out", default="arch_coverage.md", help="markdown report (default: %(default)s)")
    parser.add_argument("--json", nargs="?", const="arch_coverage.json", default=None, metavar="FILE",
                        help="also write the results as JSON (default file: %(const)s)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per architecture")
    parser.add_argument("--in-process", action="store_true",
                        help="run every architecture in this interpreter (no isolation, no time limit)")
    parser.add_argument("--cpu-only", action="store_true",
                        help="only check that the tiny configs build and run on the CPU")
    parser.add_argument("--experts-implementation", dest="experts", metavar="NAME",
                        help="transformers experts_implementation for MoE models (e.g. eager; "
                             "default: transformers' choice, grouped_mm)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)

    if opts.worker:
        result = check_arch(opts.worker, cpu_only=opts.cpu_only, experts=opts.experts)
        print(_RESULT_MARK + json.dumps(result), flush=True)
        return 0

    if opts.arch:
        arches = [a.strip() for a in opts.arch.split(",") if a.strip()]
    elif opts.subset:
        arches = list(SUBSETS[opts.subset])
    else:
        arches = all_arches()
    known = set(all_arches())
    results = []
    start = time.time()
    for i, arch in enumerate(arches, 1):
        if arch not in known:
            r = {"arch": arch, "status": "skip", "reason": "not a causal-LM model type in this transformers",
                 "fallback_ops": {}, "max_abs_diff": None, "params": None, "seconds": 0.0}
        elif opts.in_process:
            r = check_arch(arch, cpu_only=opts.cpu_only, experts=opts.experts)
        else:
            r = run_isolated(arch, timeout=opts.timeout, cpu_only=opts.cpu_only, experts=opts.experts)
        results.append(r)
        print(f"[{i}/{len(arches)}] {arch:<28} {r['status']:<4} {r['seconds']:6.1f}s  {r['reason'][:100]}",
              file=sys.stderr, flush=True)
    total = time.time() - start
    env = environment()
    if opts.experts:
        env["experts_implementation"] = opts.experts
    print(render_table(results))
    print(f"total {total:.0f} s")
    with open(opts.out, "w") as f:
        f.write(render_markdown(results, total, env))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"summary": summarize(results), "environment": env, "seconds": round(total, 1),
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
