"""torchmem.scope"""
