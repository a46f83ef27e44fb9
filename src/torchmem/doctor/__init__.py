"""torchmem.doctor"""
