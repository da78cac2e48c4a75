"""A Qwen3-VL processor without its video processor, for the tiny Qwen-Image-2.1 pipeline
(`tiny_diffusion.qwen_image21`).

Transformers' `Qwen3VLProcessor` requires a video processor, and its video processors need
torchvision, which has no build for this PyTorch on PyPI. Text-to-image prompts and condition
images never reach the video processor, so `Qwen3VLImageTextProcessor` drops it and keeps
everything else (the chat template, the image-pad expansion, the PIL image processor).

A pipeline saved with it names this module in `model_index.json`. Diffusers loads a component
from such a module only if it is already imported, and finds the loading methods by looking up
the base classes it knows (`ProcessorMixin`) in that same module. So `import torch_neuronx`
imports this module, and the classes are made on first use (PEP 562), which keeps Transformers
out of `import torch`.
"""

__all__ = ["Qwen3VLImageTextProcessor"]


def _define():
    from transformers import ProcessorMixin, Qwen3VLProcessor

    class Qwen3VLImageTextProcessor(Qwen3VLProcessor):
        """`Qwen3VLProcessor` for prompts and images only (no video processor)."""

        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)

    Qwen3VLImageTextProcessor.__module__ = __name__
    globals().update(ProcessorMixin=ProcessorMixin, Qwen3VLImageTextProcessor=Qwen3VLImageTextProcessor)


def __getattr__(name):
    if name in ("ProcessorMixin", "Qwen3VLImageTextProcessor"):
        _define()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
