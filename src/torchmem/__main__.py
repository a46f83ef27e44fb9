"""``python -m torchmem``: the same as the ``torchmem`` command."""

from torchmem.cli import entry

if __name__ == "__main__":
    entry()
