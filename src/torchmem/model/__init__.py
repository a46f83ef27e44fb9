"""Plain data shared by every layer of torchmem. Never imports torch.

Each module holds the frozen dataclasses of one area (readings, census, timeline,
findings, captures); all derive from :class:`torchmem.model._serde.Record`, which gives
them ``to_dict()``/``from_dict()`` for JSON captures.
"""

from torchmem.model._serde import Record, from_plain, to_plain

__all__ = ["Record", "from_plain", "to_plain"]
