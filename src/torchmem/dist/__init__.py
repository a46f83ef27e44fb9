"""Scale: compare the memory of every rank of a ``torch.distributed`` job.

See :func:`torchmem.dist.ranks.compare_ranks` (``torchmem.compare_ranks``) and
``docs/distributed.md``.
"""
