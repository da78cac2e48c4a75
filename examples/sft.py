"""TRL's supervised fine-tuning recipe, unchanged for neuron (any accelerator runs it):

    python examples/make_sft_data.py /tmp/sft            # a tiny model and a local chat dataset
    python examples/sft.py --model_name_or_path /tmp/sft/model --dataset_name /tmp/sft/data \\
        --dtype bfloat16 --max_length 128 --packing true --packing_strategy wrapped \\
        --learning_rate 2e-5 --max_steps 8 --logging_steps 1 --per_device_train_batch_size 2 \\
        --gradient_accumulation_steps 2 --save_only_model true --torch_compile true --output_dir /tmp/sft/out

Under torchrun, TP_SIZE and FSDP_SIZE choose the grid (their product is the world size):

    TP_SIZE=2 FSDP_SIZE=1 torchrun --nproc_per_node=2 examples/sft.py ...
"""
import os
import torch
from datasets import load_dataset
from transformers.distributed import DistributedConfig
from trl import ModelConfig, ScriptArguments, SFTConfig, SFTTrainer, TrlParser

def main(script_args, training_args, model_args):
    torch._dynamo.config.automatic_dynamic_shapes = False
    training_args.model_init_kwargs = {
        "revision": model_args.model_revision,
        "trust_remote_code": training_args.trust_remote_code,
        "attn_implementation": model_args.attn_implementation,
        "dtype": model_args.dtype,
        "device_map": None,
    }
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        training_args.model_init_kwargs["distributed_config"] = DistributedConfig(
            tp_size=int(os.environ.get("TP_SIZE", "1")),
            fsdp_size=int(os.environ.get("FSDP_SIZE", "1")),
        )
    train_dataset = load_dataset(script_args.dataset_name, name=script_args.dataset_config,
                                 split=script_args.dataset_train_split)
    train_dataset = train_dataset.select_columns(["messages"])
    trainer = SFTTrainer(model=model_args.model_name_or_path, args=training_args,
                         train_dataset=train_dataset)
    trainer.train()
    trainer.save_model(training_args.output_dir)
    trainer.end()

if __name__ == "__main__":
    parser = TrlParser((ScriptArguments, SFTConfig, ModelConfig))
    main(*parser.parse_args_and_config())
