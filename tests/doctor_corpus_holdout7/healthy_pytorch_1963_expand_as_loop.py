# Source: https://github.com/pytorch/pytorch/issues/1963
# Adapted: the "simplest example" of the thread kept (tgt_var, the loop over num_steps, the
#   gc/resource report); the stored comment stops at the first line of the loop body,
#   completed as the issue describes it (a source variable that requires grad expanded with
#   expand_as to tgt_var's shape, multiplied with it, summed and backpropagated); num_steps
#   defaults to 3000 and the report every 500 steps; cpu, seeded.
from __future__ import print_function, division
import gc
import argparse
import resource

import torch
from torch.autograd import Variable


def main(args):
    tgt_var = Variable(torch.rand(32, 512))

    for i in range(args.num_steps):
        src_var = Variable(torch.rand(32, 1), requires_grad=True)
        out = src_var.expand_as(tgt_var) * tgt_var
        out.sum().backward()

        if i % 500 == 0:
            gc.collect()
            max_mem_used = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            print("{:.2f} MB".format(max_mem_used / 1024))


if __name__ == '__main__':
    torch.manual_seed(0)
    parser = argparse.ArgumentParser()
    parser.add_argument('--num_steps', type=int, default=3000)
    main(parser.parse_args())
