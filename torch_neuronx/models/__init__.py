"""Ready-to-run language models for the neuron device (converted locally, no Hugging Face Hub)."""
from .minilm import minilm_path
from .smollm2 import smollm2_path

__all__ = ["minilm_path", "smollm2_path"]
