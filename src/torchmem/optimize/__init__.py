"""torchmem.optimize"""
