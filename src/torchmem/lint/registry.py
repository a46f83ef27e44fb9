"""The rule registry: one class per rule, registered by code.

A rule is data (code, name, summary, fix title and safety, docstring) plus handlers. A
handler is a method named ``visit_<AstNodeType>`` (``visit_Call``, ``visit_Attribute``...)
that receives the node and the shared :class:`~torchmem.lint.engine.Context`, or
``leave_loop`` / ``leave_function`` for rules that judge a whole loop or function once
the engine's data flow has seen it. The engine walks each file once and calls every
selected rule's handler for each node type from that single traversal.

Example:
    >>> from torchmem.lint.registry import RULES, select_rules
    >>> RULES["TMM101"].name
    'graph-accumulation'
    >>> sorted(r.code for r in select_rules(select=["TMM4"]))[:2]
    ['TMM401', 'TMM402']
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, ClassVar, Iterable

from torchmem.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.violation import FixSafety

__all__ = ["Rule", "RULES", "register", "select_rules", "resolve_codes", "DOC_SECTIONS",
           "CATEGORIES", "DEFAULT_CATEGORIES"]

#: what a rule's findings are (see :attr:`Rule.category`)
CATEGORIES = frozenset({"memory", "correctness", "hygiene", "performance"})
#: the categories of the default set: memory and gradient-correctness problems only
DEFAULT_CATEGORIES = frozenset({"memory", "correctness"})

#: docstring sections every rule must have, in this order
DOC_SECTIONS = ("What", "Why", "Known problems", "Example", "Use instead")

_CODE = re.compile(r"^TMM[0-9]{3}$")
_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")

#: code -> rule class, filled by :func:`register` when ``torchmem.lint.rules`` is imported
RULES: dict[str, type[Rule]] = {}


class Rule:
    """Base class of every lint rule.

    Subclasses set the class attributes below, write a docstring with the sections of
    :data:`DOC_SECTIONS` (``What:`` ... ``Use instead:``) and define handlers.

    Attributes:
        code: ``TMM`` + three digits; the hundreds digit is the family.
        name: unique kebab-case name.
        summary: one-line description used by ``--statistics`` and the docs index.
        fix_title: imperative title of the fix, or ``None`` when the rule has no fix.
        fix_safety: ``"safe"``/``"unsafe"``, or ``None`` when there is no fix.
        default_enabled: ``False`` for the opinionated ``TMM9xx`` rules, the hygiene
            rules and the rules on trial.
        trial: a memory or correctness rule kept off by default until its findings on
            real projects are measured to be right often enough for the default set.
        call_tails: when set, the rule's ``visit_Call`` runs only for calls whose callee's
            last name is one of these (``{"cycle"}`` for ``itertools.cycle(...)`` and
            ``cycle(...)``): the engine reads that name once per call for all such rules.
        category: what a finding is: ``"memory"`` (memory kept or wasted),
            ``"correctness"`` (wrong gradients or a runtime error), both in the default set;
            ``"hygiene"`` (deprecated or fragile API use, not a memory problem) and
            ``"performance"`` (opinionated speed advice), both opt-in. Hygiene findings
            say so at the start of their message.
    """

    code: ClassVar[str] = ""
    call_tails: ClassVar[frozenset[str] | None] = None
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    fix_title: ClassVar[str | None] = None
    fix_safety: ClassVar[FixSafety | None] = None
    default_enabled: ClassVar[bool] = True
    trial: ClassVar[bool] = False
    category: ClassVar[str] = "memory"

    @classmethod
    def family(cls) -> str:
        """The family prefix, e.g. ``"TMM1"``."""
        return cls.code[:4]

    @classmethod
    def doc_sections(cls) -> dict[str, str]:
        """The rule docstring split into its sections (``{"What": "...", ...}``)."""
        return split_doc(cls.__doc__ or "")


def split_doc(doc: str) -> dict[str, str]:
    """Split a rule docstring into its ``Section:`` blocks (dedented, stripped)."""
    import textwrap

    lines = textwrap.dedent("\n".join(doc.splitlines()[1:])).splitlines() if doc else []
    head = doc.splitlines()[0].strip() if doc else ""
    sections: dict[str, list[str]] = {"": [head]}
    current = ""
    for line in lines:
        stripped = line.rstrip()
        key = stripped[:-1] if stripped.endswith(":") else None
        if key in DOC_SECTIONS and not line.startswith(" "):
            current = key
            sections[current] = []
            continue
        sections.setdefault(current, []).append(line[4:] if line.startswith("    ") else line)
    return {k: textwrap.dedent("\n".join(v)).strip("\n") for k, v in sections.items()}


def register(cls: type[Rule]) -> type[Rule]:
    """Class decorator: validate a rule's metadata and add it to :data:`RULES`.

    Raises:
        ValueError: the code or name is malformed or already taken.
    """
    if not _CODE.match(cls.code):
        raise ValueError(f"rule code must look like TMM123; got {cls.code!r}")
    if not _NAME.match(cls.name):
        raise ValueError(f"rule name must be kebab-case; got {cls.name!r}")
    if cls.code in RULES and RULES[cls.code] is not cls:
        raise ValueError(f"duplicate rule code {cls.code}")
    if any(r.name == cls.name and r is not cls for r in RULES.values()):
        raise ValueError(f"duplicate rule name {cls.name}")
    if cls.category not in CATEGORIES:
        raise ValueError(f"{cls.code}: category must be one of {sorted(CATEGORIES)}")
    if cls.default_enabled != (cls.category in DEFAULT_CATEGORIES and not cls.trial):
        raise ValueError(f"{cls.code}: only memory and correctness rules are on by default "
                         f"(and not those on trial)")
    if cls.trial and cls.category not in DEFAULT_CATEGORIES:
        raise ValueError(f"{cls.code}: only memory and correctness rules go on trial")
    if (cls.fix_title is None) != (cls.fix_safety is None):
        raise ValueError(f"{cls.code}: fix_title and fix_safety go together")
    RULES[cls.code] = cls
    return cls


def _load() -> dict[str, type[Rule]]:
    return RULES  # filled when this module is imported (see the end of the module)


def resolve_codes(items: Iterable[str], *, what: str = "--select") -> set[str]:
    """Expand codes, prefixes (``TMM1``, ``TMM``) and names to a set of rule codes.

    ``ALL`` selects every rule, opinionated ones included.

    Raises:
        UsageError: an item matches no rule.
    """
    rules = _load()
    out: set[str] = set()
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        up = item.upper()
        if up == "ALL":
            out.update(rules)
            continue
        if up == "TMM":  # the family-less prefix means the default set
            out.update(c for c, r in rules.items() if r.default_enabled)
            continue
        matched = {c for c in rules if c.startswith(up)} if up.startswith("TMM") else {
            c for c, r in rules.items() if r.name == item.lower()}
        if not matched:
            raise UsageError(
                f"{what}: unknown rule code or prefix {item!r}; expected e.g. TMM101, TMM1 or ALL",
                tip="run 'torchmem lint --explain ALL' to list the rules")
        out |= matched
    return out


def select_rules(select: Iterable[str] | None = None,
                 ignore: Iterable[str] | None = None) -> list[type[Rule]]:
    """Return the rule classes a selection enables, ordered by code.

    Without ``select`` (or with ``TMM``) the default set is used: the memory and
    correctness rules, not the hygiene (``TMM401``, ``TMM402``, ``TMM404``, ``TMM603``) or
    opinionated ``TMM9xx`` ones. A code (``TMM901``), a family prefix (``TMM9``) or ``ALL``
    enables those too. ``ignore`` wins over ``select``.

    Raises:
        UsageError: a code or prefix matches no rule.
    """
    rules = _load()
    if select is None:
        chosen = {c for c, r in rules.items() if r.default_enabled}
    else:
        chosen = resolve_codes(select, what="--select")
    if ignore:
        chosen -= resolve_codes(ignore, what="--ignore")
    return [rules[c] for c in sorted(chosen)]


# Fill RULES on import, so that ``from torchmem.lint.registry import RULES`` is complete.
# (The rule modules import this one; by now every name they need is defined.)
import torchmem.lint.rules  # noqa: E402,F401
