# Source: https://github.com/pytorch/pytorch/issues/10830
# Adapted: data = arange(1e6) instead of 1e9, samples of 1e3 instead of 1e5, the top 1e3 kept
#   instead of 1e5, 300 iterations instead of 1e4, the nvidia-smi call replaced by a print of the
#   buffer's size and its running maximum every 100 iterations, cpu, seeded.
import torch as tr

tr.manual_seed(0)
device = tr.device("cpu")
print ('device:', device)

#parameters
pars = tr.tensor([0.5],requires_grad=True,device=device)

#data
data = tr.arange(1e6,device=device)
print(data)

#sample
def sample(x,sample_size=int(1e3)):
	sample_idx = tr.randint(high=x.size()[0],size=(sample_size,),dtype=tr.long)
	return data[sample_idx]

def leaveTopK(x,k):
	_,idx = tr.sort(x,descending=True)
	x = x[idx]
	return x[:k]

#main loop
out = tr.tensor([],device=device)
for i in range(300):
	out = tr.cat([out,pars*sample(data)])
	out = leaveTopK(out,int(1e3))

	if i%100 == 0:
		print(i, tuple(out.shape), out.max().item())
