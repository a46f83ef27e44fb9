# Source: https://github.com/pabloppp/pytorch-tools/issues/1
#   code: torchtools/vq.py (VectorQuantize) and torchtools/functional/vq.py (vector_quantize)
#   at commit 6396824, the line the issue points at
# Adapted: VectorQuantize and vector_quantize copied without docstrings (Binarize dropped),
#   tabs kept; the training they are used in written as a small vector-quantized autoencoder
#   on random 32-dim vectors (linear encoder to 64 dims, VectorQuantize with k=256 and
#   ema_loss=True, linear decoder, reconstruction loss plus the straight-through and
#   commitment terms), batches of 128, 80 steps of Adam; cpu, seeded.
import torch
from torch import nn
from torch.autograd import Function


class vector_quantize(Function):
	@staticmethod
	def forward(ctx, x, codebook):
		with torch.no_grad():
			codebook_sqr = torch.sum(codebook ** 2, dim=1)
			x_sqr = torch.sum(x ** 2, dim=1, keepdim=True)

			dist  = torch.addmm(codebook_sqr + x_sqr, x, codebook.t(), alpha=-2.0, beta=1.0)
			_, indices = dist.min(dim=1)

			ctx.save_for_backward(indices, codebook)
			ctx.mark_non_differentiable(indices)

			nn = torch.index_select(codebook, 0, indices)
			return nn, indices

	@staticmethod
	def backward(ctx, grad_output, grad_indices):
		grad_inputs, grad_codebook = None, None

		if ctx.needs_input_grad[0]:
			grad_inputs = grad_output.clone()
		if ctx.needs_input_grad[1]:
			indices, codebook = ctx.saved_tensors

			grad_codebook = torch.zeros_like(codebook)
			grad_codebook.index_add_(0, indices, grad_output)

		return (grad_inputs, grad_codebook)


class VectorQuantize(nn.Module):
	def __init__(self, embedding_size, k, ema_decay=0.99, ema_loss=False):
		super(VectorQuantize, self).__init__()

		self.codebook = nn.Embedding(k, embedding_size)
		self.codebook.weight.data.uniform_(-1./k, 1./k)
		self.vq = vector_quantize.apply

		self.ema_decay = ema_decay
		self.ema_loss = ema_loss
		if ema_loss:
			self.register_buffer('ema_element_count', torch.ones(k))
			self.register_buffer('ema_weight_sum', torch.zeros_like(self.codebook.weight))

	def _laplace_smoothing(self, x, epsilon):
		n = torch.sum(x)
		return ((x + epsilon) / (n + x.size(0) * epsilon) * n)

	def _updateEMA(self, z_e_x, z_q_x):
		expanded = self.codebook.weight.unsqueeze(-2).expand(*self.codebook.weight.shape[:-1], z_q_x.size(0), -1)
		mask = (expanded == z_q_x).float()
		elem_count = mask.mean(dim=-1).sum(dim=-1)
		weight_sum = (mask * z_e_x).sum(-2)

		self.ema_element_count = (self.ema_decay * self.ema_element_count) + ((1-self.ema_decay) * elem_count)
		self.ema_element_count = self._laplace_smoothing(self.ema_element_count, 1e-5)
		self.ema_weight_sum = (self.ema_decay * self.ema_weight_sum) + ((1-self.ema_decay) * weight_sum)

		self.codebook.weight.data = self.ema_weight_sum / (self.ema_element_count.unsqueeze(-1))

	def forward(self, z_e_x):
		z_q_x, indices = self.vq(z_e_x, self.codebook.weight.detach())
		z_q_x_grd = torch.index_select(self.codebook.weight, dim=0, index=indices)
		if self.ema_loss and self.training:
			self._updateEMA(z_e_x.detach(), z_q_x.detach())
		return z_q_x, z_q_x_grd


torch.manual_seed(0)
encoder = nn.Linear(32, 64)
vq = VectorQuantize(64, 256, ema_loss=True)
decoder = nn.Linear(64, 32)
params = list(encoder.parameters()) + list(decoder.parameters())
optimizer = torch.optim.Adam(params, lr=1e-3)
for step in range(80):
	x = torch.randn(128, 32)
	z_e_x = encoder(x)
	z_q_x, z_q_x_grd = vq(z_e_x)
	z_q_x_st = z_e_x + (z_q_x - z_e_x).detach()
	x_rec = decoder(z_q_x_st)
	loss = nn.functional.mse_loss(x_rec, x) + 0.25 * nn.functional.mse_loss(z_e_x, z_q_x_grd.detach())
	optimizer.zero_grad()
	loss.backward()
	optimizer.step()
	if step % 20 == 0:
		print(step, loss.item())
