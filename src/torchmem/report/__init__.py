"""torchmem.report"""
