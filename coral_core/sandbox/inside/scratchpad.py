"""The worker's only buffer for a candidate's bytes, wiped after every job.

Every child is a fork of the worker and inherits its whole heap, freed memory included. A
value a candidate reported, or its captured output, read into an ordinary `bytes` object
would stay in freed memory after the job and reach every later child, where a sibling could
search for it. So the worker reads whatever a child sends, and every captured output, into
this one preallocated buffer (readv/preadv write into it directly), forwards it from there
(writev), moves data inside it with memmove, and zeroes it with memset after each job: no
byte of a candidate ever lands in a new Python object.
"""

from __future__ import annotations

import ctypes
import os


class Scratchpad:
    def __init__(self, size):
        self._allocate(size)

    def _allocate(self, size):
        self.buffer = bytearray(size)
        self.view = memoryview(self.buffer)
        self._cells = (ctypes.c_char * size).from_buffer(self.buffer)
        self.address = ctypes.addressof(self._cells)
        self.start = self.end = self.high = 0

    @property
    def size(self):
        return len(self.buffer)

    def ensure(self, size):
        """At least `size` bytes (a job may allow larger records): the old buffer is wiped
        before it is dropped."""
        if size > self.size:
            self.wipe()
            del self._cells
            self.view.release()
            self._allocate(size)

    def fill(self, fd):
        """Read what `fd` has into the free space; the number of bytes (0 at end of file)."""
        count = os.readv(fd, [self.view[self.end:]])
        self.end += count
        self.high = max(self.high, self.end)
        return count

    def read_at(self, fd, size, offset):
        """pread `size` bytes at `offset` into the start of the (empty) buffer; a view."""
        size = min(size, self.size)
        count = os.preadv(fd, [self.view[:size]], offset)
        self.high = max(self.high, count)
        return self.view[:count]

    def full(self):
        return self.end >= self.size

    def next_line(self):
        """(start, end) of the next complete line (end at its newline), or None."""
        newline = self.buffer.find(b"\n", self.start, self.end)
        if newline < 0:
            return None
        start, self.start = self.start, newline + 1
        return start, newline

    def compact(self):
        """Move the incomplete tail to the front (memmove: no temporary copy)."""
        if self.start:
            left = self.end - self.start
            ctypes.memmove(self.address, self.address + self.start, left)
            self.start, self.end = 0, left

    def number(self, start, end):
        """An int or float written at [start, end) (digits only, a few bytes), or None."""
        if end - start > 32:
            return None
        text = self.buffer[start:end]
        try:
            return int(text) if b"." not in text else float(text)
        except ValueError:
            return None

    def wipe(self):
        """Zero every byte used since the last wipe; empty the buffer."""
        if self.high:
            ctypes.memset(self.address, 0, self.high)
        self.start = self.end = self.high = 0
