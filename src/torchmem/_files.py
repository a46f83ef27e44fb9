"""Write a file the way a user expects: atomically, through links, with the usual mode.

One writer for every file torchmem writes (captures, HTML reports, ``lint --fix``):

- a symlink (or a chain of them) is resolved with :func:`os.path.realpath` and its
  target is written; the link stays a link;
- a new file gets the mode ``open(path, "w")`` would give it (``0666 & ~umask``), an
  existing one keeps its permission bits, owner and group;
- **atomic replace** (a temporary file in the same directory, then :func:`os.replace`)
  whenever nothing is lost by swapping the inode: a crash or a kill mid-write leaves
  the old or the new content, never half of each. That is a new file, or an existing
  one with a single name (``st_nlink == 1``) that belongs to the current user and
  group, in a writable directory. (Extended attributes and ACLs are not carried over.)
- **in place** (open, write, truncate), as ruff does, otherwise: a file with several
  hard links (a rename would detach this name from the others), a file owned by
  someone else or another group (a rename would change them), or a file in a
  read-only directory.

Only the standard library: ``model`` and ``lint`` use it on machines without torch.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["write_file"]


def _atomic_ok(real: str, st: os.stat_result) -> bool:
    if st.st_nlink != 1:
        return False
    geteuid, getegid = getattr(os, "geteuid", None), getattr(os, "getegid", None)
    if geteuid is not None and st.st_uid != geteuid():
        return False
    if getegid is not None and st.st_gid != getegid():  # a new file would get our group
        return False
    return os.access(os.path.dirname(real) or ".", os.W_OK | os.X_OK)


def _replace(real: str, data: bytes, mode: int | None) -> None:
    directory = os.path.dirname(real) or "."
    base = os.path.basename(real)
    for attempt in range(100):
        tmp = os.path.join(directory, f".{base}.{os.getpid()}.{attempt}.tmp")
        try:  # 0o666: the umask applies, as with open(path, "w")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        break
    else:  # pragma: no cover - 100 stale temporary files
        raise FileExistsError(errno.EEXIST, f"cannot create a temporary file next to {real}")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _in_place(real: str, data: bytes) -> None:
    with open(real, "r+b") as fh:
        fh.write(data)
        fh.truncate()


def write_file(path: str | os.PathLike[str], data: bytes) -> str:
    """Write ``data`` to ``path`` (or to the file it links to); return the real path.

    Raises:
        OSError: the file cannot be written, or is not a regular file. After a failed
            atomic write no partial file is left behind and the old content is intact.
    """
    real = os.path.realpath(path)
    try:
        st: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        st = None
    if st is None:
        os.makedirs(os.path.dirname(real) or ".", exist_ok=True)
        _replace(real, data, None)
    elif not stat.S_ISREG(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "not a regular file", str(path)) \
            if stat.S_ISDIR(st.st_mode) else OSError(errno.EINVAL, "not a regular file", str(path))
    elif _atomic_ok(real, st):
        _replace(real, data, stat.S_IMODE(st.st_mode))
    else:
        _in_place(real, data)
    return real
