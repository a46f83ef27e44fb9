"""torchmem.analyze"""
