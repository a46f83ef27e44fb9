# Source: https://github.com/facebookresearch/MetaBalance/issues/2
#   code: metabalance.py and example_main_metabalance.py at the repository's commit
# Adapted: MetaBalance copied without its comments and docstrings, .cuda() dropped from the
#   state initialisation (cpu); the example's training loop kept (loss.backward(retain_graph=
#   True), MetaBalance.step on the four losses, the optimizer steps, the epoch sums of the four
#   losses) except that the task-layer step is moved after MetaBalance.step: torch 2.13
#   refuses the backward passes through the retained graph once Adam has updated the task
#   layers in place (version check); tqdm, tensorboardX, argparse and the evaluation
#   every 10 epochs dropped; the repository's NCF model (not in the repository) written as
#   GMF and MLP embeddings with a 3-layer MLP and four prediction layers (buy, click, fav,
#   cart) under the names the example uses; the Tmall data by 30 random batches of 256
#   user/item pairs with four random labels; 2 epochs; cpu, seeded.
import time

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim.optimizer import Optimizer

torch.manual_seed(0)
np.random.seed(0)


class MetaBalance(Optimizer):
    def __init__(self, params, relax_factor=0.7, beta=0.9):
        if not 0.0 <= relax_factor < 1.0:
            raise ValueError("Invalid relax factor: {}".format(relax_factor))
        if not 0.0 <= beta < 1.0:
            raise ValueError("Invalid beta: {}".format(beta))
        defaults = dict(relax_factor=relax_factor, beta=beta)
        super(MetaBalance, self).__init__(params, defaults)

    @torch.no_grad()
    def step(self, loss_array):
        self.balance_GradMagnitudes(loss_array)

    def balance_GradMagnitudes(self, loss_array):

      for loss_index, loss in enumerate(loss_array):
        loss.backward(retain_graph=True)
        for group in self.param_groups:
          for p in group['params']:

            if p.grad is None:
              print("breaking")
              break

            if p.grad.is_sparse:
              raise RuntimeError('MetaBalance does not support sparse gradients')

            state = self.state[p]

            if len(state) == 0:
              for j, _ in enumerate(loss_array):
                if j == 0: p.norms = [torch.zeros(1)]
                else: p.norms.append(torch.zeros(1))

            beta = group['beta']
            p.norms[loss_index] = (p.norms[loss_index]*beta) + ((1-beta)*torch.norm(p.grad))

            relax_factor = group['relax_factor']
            p.grad = (p.norms[0] * p.grad/ p.norms[loss_index]) * relax_factor + p.grad * (1.0 - relax_factor)

            if loss_index == 0:
              state['sum_gradient'] = torch.zeros_like(p.data)
              state['sum_gradient'] += p.grad
            else:
              state['sum_gradient'] += p.grad

            if p.grad is not None:
                p.grad.detach_()
                p.grad.zero_()

            if loss_index==len(loss_array) - 1:

              p.grad = state['sum_gradient']


class NCF(nn.Module):
	def __init__(self, user_num, item_num, factor_num, num_layers, dropout):
		super(NCF, self).__init__()
		self.embed_user_GMF = nn.Embedding(user_num, factor_num)
		self.embed_item_GMF = nn.Embedding(item_num, factor_num)
		self.embed_user_MLP = nn.Embedding(user_num, factor_num * (2 ** (num_layers - 1)))
		self.embed_item_MLP = nn.Embedding(item_num, factor_num * (2 ** (num_layers - 1)))
		MLP_modules = []
		for i in range(num_layers):
			input_size = factor_num * (2 ** (num_layers - i))
			MLP_modules.append(nn.Dropout(p=dropout))
			MLP_modules.append(nn.Linear(input_size, input_size//2))
			MLP_modules.append(nn.ReLU())
		self.MLP_layers = nn.Sequential(*MLP_modules)
		self.predict_layer_buy = nn.Linear(factor_num * 2, 1)
		self.predict_layer_click = nn.Linear(factor_num * 2, 1)
		self.predict_layer_fav = nn.Linear(factor_num * 2, 1)
		self.predict_layer_cart = nn.Linear(factor_num * 2, 1)

	def forward(self, user, item):
		output_GMF = self.embed_user_GMF(user) * self.embed_item_GMF(item)
		output_MLP = self.MLP_layers(torch.cat((self.embed_user_MLP(user), self.embed_item_MLP(item)), -1))
		concat = torch.cat((output_GMF, output_MLP), -1)
		return (self.predict_layer_buy(concat).view(-1), self.predict_layer_click(concat).view(-1),
				self.predict_layer_fav(concat).view(-1), self.predict_layer_cart(concat).view(-1))


user_num, item_num = 1000, 2000
train_loader = [(torch.randint(0, user_num, (256,)), torch.randint(0, item_num, (256,)),
				 torch.randint(0, 2, (256,)), torch.randint(0, 2, (256,)), torch.randint(0, 2, (256,)),
				 torch.randint(0, 2, (256,))) for _ in range(30)]

model = NCF(user_num, item_num, 32, 3, 0.5)
loss_function = nn.BCEWithLogitsLoss()

sharedLayerParameters = list(model.embed_user_GMF.parameters())+list(model.embed_item_GMF.parameters())+list(model.embed_user_MLP.parameters())+list(model.embed_item_MLP.parameters())+list(model.MLP_layers.parameters())

metabalance = MetaBalance(sharedLayerParameters)
optimizer_sharedLayer = optim.Adam(sharedLayerParameters, lr=0.001, weight_decay=0.0000001)

taskLayerParameters = list(model.predict_layer_buy.parameters())+list(model.predict_layer_click.parameters())+list(model.predict_layer_fav.parameters())+list(model.predict_layer_cart.parameters())
optimizer_taskLayer = optim.Adam(taskLayerParameters, lr=0.001, weight_decay=0.0000001)

count = 0
for epoch in range(2):
	model.train()
	start_time = time.time()

	print('Training at this epoch start.')
	loss_epoch_buy = 0.0
	loss_epoch_click = 0.0
	loss_epoch_fav = 0.0
	loss_epoch_cart = 0.0
	for step, batch in enumerate(train_loader):
		user = batch[0]
		item = batch[1]
		label = batch[2]
		label_click = batch[3].float()
		label_fav = batch[4].float()
		label_cart = batch[5].float()
		label = label.float()

		model.zero_grad()

		prediction_buy, prediction_click, prediction_fav, prediction_cart = model(user, item)
		loss_buy = loss_function(prediction_buy, label)
		loss_click = loss_function(prediction_click, label_click)
		loss_fav = loss_function(prediction_fav, label_fav)
		loss_cart = loss_function(prediction_cart, label_cart)

		loss = loss_buy + loss_click + loss_fav + loss_cart
		loss.backward(retain_graph=True)
		model.zero_grad()

		metabalance.step([loss_buy, loss_fav, loss_click, loss_cart])
		optimizer_taskLayer.step()
		optimizer_sharedLayer.step()

		count += 1
		loss_epoch_buy += loss_buy
		loss_epoch_click += loss_click
		loss_epoch_fav += loss_fav
		loss_epoch_cart += loss_cart
	print('buy loss of epoch: '+str(epoch), loss_epoch_buy*1.0/step)
	print('click loss of epoch: '+str(epoch), loss_epoch_click*1.0/step)
	print('fav loss of epoch: '+str(epoch), loss_epoch_fav*1.0/step)
	print('cart loss of epoch: '+str(epoch), loss_epoch_cart*1.0/step)
