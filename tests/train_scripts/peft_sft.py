"""TRL's SFTTrainer with a PEFT adapter, as its documentation writes it, on whatever device the
Trainer picks (neuron when torch_neuronx is loaded; `--cpu` for the reference):

    python tests/train_scripts/peft_sft.py MODEL_DIR DATA_DIR OUT_DIR {lora,dora} [--cpu]

trains STEPS steps of a LoRA (or DoRA) adapter on the attention and MLP projections, saves the
adapter (`save_model`), reloads it with PEFT onto a fresh copy of the base model on the same
device, merges it (`merge_and_unload`) and writes OUT_DIR/result.pt: the losses, the device,
the adapter's trained weights, and the state dicts of the base model and of the merged one, all on the CPU in float32.
"""
import os
import sys

import torch
from datasets import load_dataset
from peft import LoraConfig, PeftModel
from transformers import AutoModelForCausalLM
from trl import SFTConfig, SFTTrainer

STEPS = 6


def main(model_dir, data_dir, out_dir, kind, use_cpu):
    config = SFTConfig(output_dir=os.path.join(out_dir, "adapter"), max_steps=STEPS, learning_rate=1e-2,
                       per_device_train_batch_size=2, max_length=64, logging_steps=1, report_to="none",
                       use_cpu=use_cpu, bf16=False, seed=0, save_strategy="no",
                       model_init_kwargs={"dtype": torch.float32})
    peft_config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, use_dora=kind == "dora",
                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                             "down_proj"], task_type="CAUSAL_LM")
    dataset = load_dataset(data_dir, split="train").select_columns(["messages"])
    trainer = SFTTrainer(model=model_dir, args=config, train_dataset=dataset, peft_config=peft_config)
    trainer.train()
    trainer.save_model(config.output_dir)
    device = trainer.args.device
    adapter = cpu_copy({k: v for k, v in trainer.model.state_dict().items() if "lora_" in k})

    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(device)
    untrained = cpu_copy(base.state_dict())
    merged = PeftModel.from_pretrained(base, config.output_dir).merge_and_unload()
    torch.save({"device": str(device),
                "losses": [log["loss"] for log in trainer.state.log_history if "loss" in log],
                "adapter": adapter, "base": untrained, "merged": cpu_copy(merged.state_dict())},
               os.path.join(out_dir, "result.pt"))


def cpu_copy(state):
    return {k: v.detach().to("cpu", torch.float32, copy=True) for k, v in state.items()}


if __name__ == "__main__":
    model_dir, data_dir, out_dir, kind = sys.argv[1:5]
    main(model_dir, data_dir, out_dir, kind, "--cpu" in sys.argv[5:])
