"""Saves a tiny random Qwen3 (fixed seed) with the SmolLM2 tokenizer to a folder, for the
tensor-parallel examples and tests (no Hugging Face Hub needed):

    python examples/make_tiny_qwen3.py /tmp/tiny-qwen3 [--reference]

--reference also prints the greedy tokens of the same prompt on the CPU in one process (what
examples/tp_generate.py must print under torchrun).
"""
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

from torch_neuronx.models import smollm2_path


def make(path):
    tok = AutoTokenizer.from_pretrained(smollm2_path())
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                      tie_word_embeddings=False, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(path)
    tok.save_pretrained(path)


def reference(path):
    tok = AutoTokenizer.from_pretrained(path)
    tok.pad_token = tok.pad_token or tok.eos_token
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).eval()
    inputs = tok.apply_chat_template([{"role": "user", "content": "The future of AI is"}],
                                     add_generation_prompt=True, padding=True,
                                     tokenizer_kwargs={"pad_to_multiple_of": 64}, return_tensors="pt",
                                     return_dict=True)
    with torch.no_grad():
        out = model.generate(inputs["input_ids"], attention_mask=inputs["attention_mask"], max_new_tokens=16,
                             do_sample=False, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    return out[0, inputs["input_ids"].shape[1]:].tolist()


if __name__ == "__main__":
    make(sys.argv[1])
    if "--reference" in sys.argv:
        print("TOKENS", reference(sys.argv[1]))
