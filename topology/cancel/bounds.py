"""What a cancel takes: the states a run can be cancelled in, the most runs one bulk cancel
takes and the longest reason kept.

Plain values with no imports, so that ``warren runs cancel --help`` states them without
loading the broker's client.
"""

from __future__ import annotations

#: States a run can be cancelled in.
CANCELLABLE = ("pending", "delayed", "running", "retrying")
#: The most runs one bulk cancel takes (``--limit``).
MAX_BULK = 10_000
#: The longest reason kept: a cancel's reason is a sentence, not a document.
MAX_REASON = 500
