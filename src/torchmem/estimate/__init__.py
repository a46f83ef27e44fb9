"""torchmem.estimate"""
