"""Every rule family; importing this package registers all rules in the registry."""

from __future__ import annotations
