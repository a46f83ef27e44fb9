"""Write docs/lint/*.md from the lint rules' docstrings (``--check``: fail if out of date).

Usage:
    python scripts/gen_lint_docs.py           # rewrite the pages
    python scripts/gen_lint_docs.py --check   # exit 1 if a page differs from the rules
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torchmem.lint.docs import generate

DOCS = Path(__file__).resolve().parent.parent / "docs" / "lint"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare, write nothing")
    args = parser.parse_args(argv)
    stale = []
    for name, text in sorted(generate().items()):
        path = DOCS / name
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            continue
        stale.append(name)
        if not args.check:
            DOCS.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print(f"out of date: {', '.join(stale)}; run python scripts/gen_lint_docs.py",
              file=sys.stderr)
        return 1
    for name in stale:
        print(f"wrote docs/lint/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
