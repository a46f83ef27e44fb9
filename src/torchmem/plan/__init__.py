"""Plan before running: estimate the peak memory of a step on fake tensors.

See :func:`torchmem.plan.estimate.estimate` (``torchmem.estimate``) and
``docs/estimate.md``.
"""
