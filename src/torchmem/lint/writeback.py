"""Write a fixed file back: through symlinks and hard links, keeping mode and owner.

``torchmem lint --fix`` changes the file the user meant, never the link in front of it:

- a symlink (or a chain of them) is resolved with :func:`os.path.realpath` and the
  target is changed; the link stays a link;
- the file's permission bits, owner and inode are kept.

Two ways of writing, chosen per file (:mod:`torchmem._files`, shared by every file
torchmem writes):

- **atomic replace** (a temporary file in the same directory, then :func:`os.replace`):
  a crash or a kill mid-write leaves either the old or the new content, never half of
  each. Used when nothing would be lost by swapping the inode: the file has one name
  (``st_nlink == 1``), belongs to the current user and group, and its directory is
  writable. (Extended attributes and ACLs are not carried over by the rename.)
- **in place** (open the existing file, write, truncate), as ruff does: used for a file
  with several hard links (a rename would detach this name from the others, which would
  keep the bug), a file owned by someone else or by another group (a rename would change
  them), or a file in a read-only directory. The window in which a kill leaves a mix of old and new
  bytes is one ``write`` call of a source file.

A file without any write permission bit (``chmod a-w``) is refused, even for root:
read-only is taken as "do not touch".

Example:
    >>> write_back("train.py", b"x = 1\\n")  # doctest: +SKIP
"""

from __future__ import annotations

import errno
import os
import stat

from torchmem._files import write_file

__all__ = ["write_back"]


def write_back(path: str, data: bytes) -> None:
    """Replace the content of ``path`` (or of the file it links to) with ``data``.

    Args:
        path: the file as the user named it (may be a symlink or one of several hard links).
        data: the new bytes.

    Raises:
        PermissionError: the file is read-only (no write permission bit, or not writable
            by this user); its ``strerror`` says so in words.
        OSError: any other failure (the original content is then unchanged, except for
            an in-place write interrupted by the operating system).
    """
    real = os.path.realpath(path)
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file")
    mode = stat.S_IMODE(st.st_mode)
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(real, os.W_OK):
        raise PermissionError(errno.EACCES,
                              f"the file is read-only (mode {mode:04o}); make it writable "
                              "or run without --fix")
    write_file(real, data)
