// torch.autocast(device_type="neuron"): which ops run in the lower precision (bf16 / fp16)
// and which are kept in fp32, following the policy PyTorch uses for CUDA.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace {

using at::Tensor;

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // lower precision: matrix products and convolutions
  KERNEL_PRIVATEUSEONE(mm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(bmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(matmul, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(addmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(addbmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(baddbmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(addmv, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(mv, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(linear, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv1d, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv2d, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv3d, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv_transpose1d, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv_transpose2d, input, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(scaled_dot_product_attention, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(_convolution, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(prelu, lower_precision_fp)
  // fp32: ops whose range or accumulation needs it
  KERNEL_PRIVATEUSEONE(acos, fp32)
  KERNEL_PRIVATEUSEONE(asin, fp32)
  KERNEL_PRIVATEUSEONE(cosh, fp32)
  KERNEL_PRIVATEUSEONE(erfinv, fp32)
  KERNEL_PRIVATEUSEONE(exp, fp32)
  KERNEL_PRIVATEUSEONE(expm1, fp32)
  KERNEL_PRIVATEUSEONE(log, fp32)
  KERNEL_PRIVATEUSEONE(log10, fp32)
  KERNEL_PRIVATEUSEONE(log2, fp32)
  KERNEL_PRIVATEUSEONE(log1p, fp32)
  KERNEL_PRIVATEUSEONE(reciprocal, fp32)
  KERNEL_PRIVATEUSEONE(rsqrt, fp32)
  KERNEL_PRIVATEUSEONE(sinh, fp32)
  KERNEL_PRIVATEUSEONE(tan, fp32)
  KERNEL_PRIVATEUSEONE(pow, Tensor_Scalar, fp32)
  KERNEL_PRIVATEUSEONE(pow, Tensor_Tensor, fp32)
  KERNEL_PRIVATEUSEONE(pow, Scalar, fp32)
  KERNEL_PRIVATEUSEONE(softplus, fp32)
  KERNEL_PRIVATEUSEONE(layer_norm, fp32)
  KERNEL_PRIVATEUSEONE(group_norm, fp32)
  KERNEL_PRIVATEUSEONE(norm, Scalar, fp32)
  KERNEL_PRIVATEUSEONE(norm, ScalarOpt_dim, fp32)
  KERNEL_PRIVATEUSEONE(cosine_similarity, fp32)
  KERNEL_PRIVATEUSEONE(cosine_embedding_loss, fp32)
  KERNEL_PRIVATEUSEONE(nll_loss, fp32)
  KERNEL_PRIVATEUSEONE(nll_loss2d, fp32)
  KERNEL_PRIVATEUSEONE(hinge_embedding_loss, fp32)
  KERNEL_PRIVATEUSEONE(kl_div, fp32)
  KERNEL_PRIVATEUSEONE(l1_loss, fp32)
  KERNEL_PRIVATEUSEONE(smooth_l1_loss, fp32)
  KERNEL_PRIVATEUSEONE(huber_loss, fp32)
  KERNEL_PRIVATEUSEONE(mse_loss, fp32)
  KERNEL_PRIVATEUSEONE(margin_ranking_loss, fp32)
  KERNEL_PRIVATEUSEONE(multilabel_margin_loss, fp32)
  KERNEL_PRIVATEUSEONE(soft_margin_loss, fp32)
  KERNEL_PRIVATEUSEONE(triplet_margin_loss, fp32)
  KERNEL_PRIVATEUSEONE(multi_margin_loss, fp32)
  KERNEL_PRIVATEUSEONE(binary_cross_entropy_with_logits, fp32)
  KERNEL_PRIVATEUSEONE(dist, fp32)
  KERNEL_PRIVATEUSEONE(pdist, fp32)
  KERNEL_PRIVATEUSEONE(cdist, fp32)
  KERNEL_PRIVATEUSEONE(renorm, fp32)
  KERNEL_PRIVATEUSEONE(logsumexp, fp32)
  KERNEL_PRIVATEUSEONE(cumprod, fp32)
  KERNEL_PRIVATEUSEONE(cumsum, fp32)
  KERNEL_PRIVATEUSEONE(prod, fp32)
  KERNEL_PRIVATEUSEONE(sum, fp32)
  KERNEL_PRIVATEUSEONE(softmax, int, fp32)
  KERNEL_PRIVATEUSEONE(log_softmax, int, fp32)
  KERNEL_PRIVATEUSEONE(cross_entropy_loss, fp32)
}

} // namespace
