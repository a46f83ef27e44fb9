# Source: https://github.com/pytorch/pytorch/issues/2912
# Adapted: the two posted lines kept as the body of the function the issue describes (a big
#   sparse matrix moved to the device and multiplied by a dense vector, called several
#   times); .cuda() replaced by .to(device) with device the cpu; the matrix built as in the
#   maintainer's attempt to reproduce (size (2000, 200000)) with 400000 random non-zeros
#   instead of 40000000; 60 calls.
import torch

device = torch.device('cpu')


def sparse_times_vector(big_sparse, dense_vector):
    big_sparse = big_sparse.to(device)
    return torch.mm(big_sparse, dense_vector.view(-1,1))


torch.manual_seed(0)
nnz = 400000
indices = torch.stack([torch.randint(0, 2000, (nnz,)), torch.randint(0, 200000, (nnz,))])
big_sparse = torch.sparse_coo_tensor(indices, torch.randn(nnz), (2000, 200000)).coalesce()
results = []
for i in range(60):
    dense_vector = torch.randn(200000)
    out = sparse_times_vector(big_sparse, dense_vector)
    results.append(out.sum().item())
print(len(results), results[-1])
