"""Reading a checked file: size limit, bytes, and decoding as Python does.

Every failure becomes a `FileError` naming the file, the line where known and
the reason; the run goes on with the other files. The checked code is only
ever read, never imported or executed.
"""

from __future__ import annotations

import codecs
import io
import os
import tokenize

from layoutcheck.lint.findings import INVALID_INPUT, FileError

__all__ = ["MAX_FILE_BYTES", "SourceDecodeError", "decode_source", "read_source"]

MAX_FILE_BYTES = 5 * 1024 * 1024
"""Files above this are reported and skipped: generated code, not something to lint."""


class SourceDecodeError(ValueError):
    """Bytes that are not text in the file's declared (or default UTF-8) encoding."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line = line
        self.column = column


def _size(n: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def read_source(path: str | os.PathLike[str], display: str, max_bytes: int = MAX_FILE_BYTES) -> bytes | FileError:
    """The bytes of ``path``, or a `FileError` (shown as ``display``) saying why not."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                return FileError(
                    display, None,
                    f"file is {_size(size)}, over the {_size(max_bytes)} limit: not checked",
                    kind=INVALID_INPUT,
                )
            return handle.read()
    except OSError as exc:
        return FileError(display, None, f"cannot read file: {exc.strerror or exc}", kind=INVALID_INPUT)


def _declared_encoding(data: bytes) -> str | None:
    """The PEP 263 coding cookie, when one of the first two lines carries one."""
    head = data.split(b"\n", 2)[:2]
    if not any(b"coding" in line for line in head):
        return None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise SourceDecodeError(f"bad encoding declaration: {exc.msg}", exc.lineno) from None
    return encoding


def decode_source(data: bytes) -> tuple[str, str]:
    """``(text, encoding)`` of a Python file's bytes; `SourceDecodeError` when they do not decode.

    UTF-8 (with or without a BOM) unless a coding cookie says otherwise. The
    returned encoding writes the text back byte-for-byte (``utf-8-sig`` keeps
    a BOM). Newlines are left as they are: a fix must not rewrite them.
    """
    encoding = _declared_encoding(data) or "utf-8"
    if encoding == "utf-8" and data.startswith(codecs.BOM_UTF8):
        encoding = "utf-8-sig"
    try:
        return data.decode(encoding), encoding
    except LookupError:
        raise SourceDecodeError(f"unknown encoding {encoding!r} declared") from None
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        label = "UTF-8" if encoding.startswith("utf-8") else encoding
        raise SourceDecodeError(
            f"not valid {label}: byte 0x{data[exc.start]:02x} at line {line}, column {column}; "
            "save the file as UTF-8 or declare its encoding (PEP 263)",
            line, column,
        ) from None
