# Source: https://github.com/pytorch/pytorch/issues/126131
#   code: the repro (create_scheduler building SequentialLR and ChainedScheduler over
#   two ConstantLR and a LambdaLR, an ASGD optimizer with capturable=True and foreach=True,
#   stepped inside a function called repeatedly)
# Adapted: CPU instead of CUDA, so the optimizer is created with capturable=False and
#   CudaMemoryLeakCheck (a CUDA-only test helper) is replaced by a plain loop of 300 calls;
#   a 256x256 weight instead of the test's small tensors; both scheduler kinds are built
#   and stepped 5 times per call, as the repro's body does for one of them.
import torch
from torch.optim.lr_scheduler import LambdaLR, ChainedScheduler, ConstantLR, SequentialLR


LR_SCHEDULER_TO_KWARGS = {
    LambdaLR: {"lr_lambda": lambda x: 10},
    ChainedScheduler: {"schedulers": None},
    SequentialLR: {"schedulers": None, "milestones": [1, 2]},
    ConstantLR: {"factor": 0.001},
}


def create_scheduler(scheduler, optim):
    kwargs = dict(LR_SCHEDULER_TO_KWARGS[scheduler])
    if "schedulers" in kwargs:
        kwargs["schedulers"] = [
            create_scheduler(ConstantLR, optim)
            for _ in range(2)
        ] + [create_scheduler(LambdaLR, optim)]

    if scheduler == ChainedScheduler:
        return scheduler(**kwargs)
    else:
        return scheduler(optim, **kwargs)


def chained_fn(scheduler_cls):
    device = "cpu"
    dtype = torch.float32
    optim_cls = torch.optim.ASGD
    kwargs = {'lr': 0.001, 'weight_decay': 0.1, 'maximize': True, 'capturable': False, 'foreach': True}
    weight = torch.randn((256, 256), device=device, dtype=dtype, requires_grad=True)
    bias = torch.randn((256,), device=device, dtype=dtype, requires_grad=True)
    inpt = torch.randn(256, device=device, dtype=dtype)
    optimizer = optim_cls([weight, bias], **kwargs)
    scheduler = create_scheduler(scheduler_cls, optimizer)
    for _ in range(5):
        optimizer.zero_grad()
        loss = (weight.mv(inpt) + bias).pow(2).sum()
        loss.backward()
        optimizer.step()
        scheduler.step()
    return loss.item()


torch.manual_seed(0)
for i in range(300):
    value = chained_fn(SequentialLR if i % 2 else ChainedScheduler)
    if i % 50 == 0:
        print(i, value)
