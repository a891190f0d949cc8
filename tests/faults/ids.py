"""A tracker of consumed message ids 0, 1, 2... in a bitmap: one bit per id.

The soak consumes millions of sequential ids and must say, at the end, which were
never seen and how many were seen more than once. A ``set[int]`` of them costs
about 60 bytes an id (over 100 MB for two million) and would make the soak measure
its own bookkeeping; the bitmap costs one bit an id (250 KB for two million) and
finds a missing id and a duplicate just as well.
"""

from __future__ import annotations

import sys

_CHUNK = 64 * 1024  # bytes the bitmap grows by (524,288 ids): a bounded overshoot


class IdTracker:
    """Records ids (non-negative ints), counting the distinct ones and the duplicates."""

    __slots__ = ("_bits", "distinct", "duplicates", "high")

    def __init__(self, expected: int = 0) -> None:
        self._bits = bytearray((expected + 7) // 8)
        #: how many different ids were added
        self.distinct = 0
        #: how many adds were of an id already added
        self.duplicates = 0
        #: one past the highest id added (0 before any)
        self.high = 0

    def add(self, i: int) -> bool:
        """Record ``i``; True the first time, False for a duplicate."""
        if i < 0:
            raise ValueError(f"ids are non-negative, not {i}")
        byte, bit = i >> 3, 1 << (i & 7)
        bits = self._bits
        if byte >= len(bits):
            bits.extend(bytes(byte - len(bits) + _CHUNK))
        if bits[byte] & bit:
            self.duplicates += 1
            return False
        bits[byte] |= bit
        self.distinct += 1
        if i >= self.high:
            self.high = i + 1
        return True

    def __contains__(self, i: int) -> bool:
        byte = i >> 3
        return i >= 0 and byte < len(self._bits) and bool(self._bits[byte] & (1 << (i & 7)))

    def missing_count(self, n: int) -> int:
        """How many of the ids ``0 .. n - 1`` were never added (ids >= n are not counted)."""
        full, rest = divmod(n, 8)
        bits = self._bits
        seen = int.from_bytes(bits[:full], "little").bit_count()
        if rest and full < len(bits):
            seen += (bits[full] & ((1 << rest) - 1)).bit_count()
        return n - seen

    def missing(self, n: int, limit: int = 10) -> list[int]:
        """The first ``limit`` ids of ``0 .. n - 1`` never added."""
        out: list[int] = []
        bits = self._bits
        start = 0
        while len(out) < limit:
            # Skip the complete bytes fast: only a byte that is not 0xff holds a gap.
            byte = start >> 3
            while byte < len(bits) and bits[byte] == 0xFF:
                byte += 1
            i = max(start, byte * 8)
            if i >= n:
                break
            if i not in self:
                out.append(i)
            start = i + 1
        return out

    def nbytes(self) -> int:
        """The tracker's memory: the object and its bitmap."""
        return sys.getsizeof(self) + sys.getsizeof(self._bits)
