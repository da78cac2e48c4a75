"""Small random diffusion pipelines (Stable Diffusion, FLUX, FLUX.2, Qwen-Image) built from configs (no Hugging Face Hub), the way Diffusers'
own tests build theirs: for tests, examples/diffusion.py and bench/diffusion.py.

The pipelines have no text encoder or tokenizer: callers pass prompt embeddings
(`prompt_inputs`), drawn from a fixed seed. Weights are random (seeded), so images are noise;
what matters is that the neuron and CPU pipelines compute the same ones.
"""
import torch


def stable_diffusion(size=32, widths=(32, 64), layers_per_block=2, cross_attention_dim=32, seed=0):
    """A StableDiffusionPipeline: a UNet with one plain and one cross-attention down/up level per
    width in `widths`, a VAE of the same widths, a DDIM scheduler."""
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel

    torch.manual_seed(seed)
    levels = len(widths)
    unet = UNet2DConditionModel(block_out_channels=tuple(widths), layers_per_block=layers_per_block, sample_size=size,
                                in_channels=4, out_channels=4,
                                down_block_types=("DownBlock2D",) + ("CrossAttnDownBlock2D",) * (levels - 1),
                                up_block_types=("CrossAttnUpBlock2D",) * (levels - 1) + ("UpBlock2D",),
                                cross_attention_dim=cross_attention_dim, norm_num_groups=32)
    vae = AutoencoderKL(block_out_channels=list(widths), in_channels=3, out_channels=3, latent_channels=4,
                        down_block_types=["DownEncoderBlock2D"] * levels, up_block_types=["UpDecoderBlock2D"] * levels,
                        norm_num_groups=32)
    scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                              set_alpha_to_one=False, steps_offset=1)
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=None, tokenizer=None, unet=unet, scheduler=scheduler,
                                   safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    pipe.cross_attention_dim = cross_attention_dim
    return pipe


def flux(size=32, seed=0):
    """A FluxPipeline with a one-layer (plus one single-stream layer) transformer and a one-level VAE."""
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel

    torch.manual_seed(seed)
    transformer = FluxTransformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
                                         attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                         pooled_projection_dim=32, axes_dims_rope=[4, 4, 8])
    vae = AutoencoderKL(sample_size=size, in_channels=3, out_channels=3, block_out_channels=(4,), layers_per_block=1,
                        latent_channels=1, norm_num_groups=1, use_quant_conv=False, use_post_quant_conv=False,
                        shift_factor=0.0609, scaling_factor=1.5035)
    return FluxPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=None, tokenizer=None,
                        text_encoder_2=None, tokenizer_2=None, transformer=transformer)


def flux2(size=32, seed=0):
    """A Flux2Pipeline with a one-layer (plus one single-stream layer) transformer and a one-level VAE."""
    from diffusers import AutoencoderKLFlux2, FlowMatchEulerDiscreteScheduler, Flux2Pipeline, Flux2Transformer2DModel

    torch.manual_seed(seed)
    transformer = Flux2Transformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                          attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                          timestep_guidance_channels=32, axes_dims_rope=(4, 4, 4, 4))
    vae = AutoencoderKLFlux2(block_out_channels=(8,), layers_per_block=1, latent_channels=4, norm_num_groups=4,
                             sample_size=size, down_block_types=("DownEncoderBlock2D",),
                             up_block_types=("UpDecoderBlock2D",))
    return Flux2Pipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=None, tokenizer=None,
                         transformer=transformer)


def qwen_image(seed=0):
    """A QwenImagePipeline with a two-layer transformer and a three-level (video) VAE."""
    from diffusers import (AutoencoderKLQwenImage, FlowMatchEulerDiscreteScheduler, QwenImagePipeline,
                           QwenImageTransformer2DModel)

    torch.manual_seed(seed)
    transformer = QwenImageTransformer2DModel(patch_size=2, in_channels=16, out_channels=4, num_layers=2,
                                              attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                                              guidance_embeds=False, axes_dims_rope=(8, 4, 4))
    vae = AutoencoderKLQwenImage(base_dim=24, z_dim=4, dim_mult=[1, 2, 4], num_res_blocks=1,
                                 temperal_downsample=[False, True], latents_mean=[0.0] * 4, latents_std=[1.0] * 4)
    return QwenImagePipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=None, tokenizer=None,
                             transformer=transformer)


def prompt_inputs(pipe, device, dtype=torch.float32, seed=1):
    """Keyword arguments that stand for a prompt: its embeddings (and, for Stable Diffusion, a
    negative prompt's) with the pipeline's usual guidance scale, on `device`."""
    g = torch.Generator().manual_seed(seed)
    kind = type(pipe).__name__
    if kind == "FluxPipeline":
        emb, pooled = torch.randn(1, 8, 32, generator=g), torch.randn(1, 32, generator=g)
        return dict(prompt_embeds=emb.to(device, dtype), pooled_prompt_embeds=pooled.to(device, dtype),
                    guidance_scale=3.5)
    if kind == "Flux2Pipeline":
        return dict(prompt_embeds=torch.randn(1, 8, 32, generator=g).to(device, dtype), guidance_scale=4.0)
    if kind == "QwenImagePipeline":
        emb, neg = torch.randn(1, 8, 16, generator=g), torch.randn(1, 8, 16, generator=g)
        mask = torch.ones(1, 8, dtype=torch.long, device=device)
        return dict(prompt_embeds=emb.to(device, dtype), prompt_embeds_mask=mask,
                    negative_prompt_embeds=neg.to(device, dtype), negative_prompt_embeds_mask=mask, true_cfg_scale=4.0)
    dim = pipe.cross_attention_dim
    emb, neg = torch.randn(1, 7, dim, generator=g), torch.randn(1, 7, dim, generator=g)
    return dict(prompt_embeds=emb.to(device, dtype), negative_prompt_embeds=neg.to(device, dtype), guidance_scale=6.0)
