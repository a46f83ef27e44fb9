"""Command lines of the form ``torchmem <cmd> [options] (script.py | -m module) [args...]``.

Options of torchmem come before the script; everything after the script path (or after
``-m module``) belongs to the script, exactly as with ``python``. argparse cannot express
that split, so this module finds it and lets argparse parse only torchmem's part.
"""

from __future__ import annotations

import argparse
import os
from typing import Mapping, Sequence

from torchmem.doctor.target import Target, load_target
from torchmem.errors import UsageError

__all__ = ["add_target_arguments", "parse_with_target"]


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """Document the target in ``--help`` (the split itself is done by :func:`parse_with_target`)."""
    parser.add_argument("-m", dest="module", metavar="MODULE",
                        help="run a library module as a script, like 'python -m MODULE'")
    parser.add_argument("script", nargs="?", help="the Python script to run")
    parser.add_argument("args", nargs="*", help="arguments passed to the script")


def _option_takes_value(parser: argparse.ArgumentParser, token: str) -> bool:
    name = token.split("=", 1)[0]
    for action in parser._actions:  # argparse has no public query for this
        if name in action.option_strings:
            return action.nargs != 0 and "=" not in token
    return False


def parse_with_target(parser: argparse.ArgumentParser,
                      argv: Sequence[str]) -> tuple[argparse.Namespace, Target]:
    """Split ``argv`` into torchmem options and the script's target and arguments.

    Raises:
        UsageError: no script given, or an unknown torchmem option before it.
    """
    argv = list(argv)
    own: list[str] = []
    i = 0
    target: Target | None = None
    while i < len(argv):
        token = argv[i]
        if token == "-m" or token.startswith("-m") and len(token) > 2 and not token.startswith("--"):
            module = token[2:] if len(token) > 2 else (argv[i + 1] if i + 1 < len(argv) else None)
            if not module:
                raise UsageError("-m needs a module name; expected 'torchmem ... -m pkg.train'")
            rest = argv[i + (1 if len(token) > 2 else 2):]
            target = Target(module=module, args=rest)
            break
        if token == "--":
            if i + 1 >= len(argv):
                break
            target = Target(path=argv[i + 1], args=argv[i + 2:])
            break
        if token.startswith("-") and token != "-":
            own.append(token)
            if _option_takes_value(parser, token) and i + 1 < len(argv):
                own.append(argv[i + 1])
                i += 1
            i += 1
            continue
        target = Target(path=token, args=argv[i + 1:])
        break
    namespace = parser.parse_args(own)  # exits 0 on --help, 2 on unknown options
    if target is None:
        parser.print_usage()
        raise UsageError("expected a script to run, e.g. 'train.py' or '-m pkg.train'")
    return namespace, target


def check_target(target: Target) -> None:
    """Report a missing, unreadable, undecodable or broken script file now: call it after
    the options are checked and before torch is imported, so the one-line error comes at
    once and without whatever torch prints while importing.

    Raises:
        InputError: see :func:`torchmem.doctor.target.load_target`.
    """
    if target.path is not None:
        load_target(target)


def rank_path(path: str, env: Mapping[str, str] | None = None) -> str:
    """The file a rank writes when every rank of a ``torchrun`` job was given ``path``.

    ``{rank}`` in ``path`` becomes the rank (``run-{rank}.json``). Otherwise, in a job of
    more than one rank (``WORLD_SIZE`` > 1), ``.rank<N>`` goes before the extension
    (``run.json`` -> ``run.rank1.json``), so ranks never overwrite each other's file.
    Outside ``torchrun`` the path is unchanged.
    """
    env = os.environ if env is None else env
    rank = env.get("RANK", "")
    if "{rank}" in path:
        return path.replace("{rank}", rank or "0")
    try:
        world = int(env.get("WORLD_SIZE", "1") or "1")
    except ValueError:
        world = 1
    if world <= 1 or not rank:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext}"
