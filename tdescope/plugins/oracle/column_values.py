"""Column values as Oracle stores them in a row: NUMBER and character data.

A data block does not say which type a column has (that lives in the data
dictionary), so :func:`guess_column` only guesses, and says it guesses.
"""

from __future__ import annotations

from decimal import Context, Decimal

__all__ = ["decode_number", "decode_varchar2", "guess_column", "try_decode_number"]

# Oracle NUMBER: one exponent byte then up to 20 base-100 mantissa digits.
# Positive: exponent byte = 0xC1 + e, digit byte = digit + 1.
# Negative: exponent byte = 0x3E - e (the complement), digit byte = 101 - digit,
# followed by a 0x66 terminator when fewer than 20 digits are stored.
_ZERO = b"\x80"
_NEG_TERMINATOR = 0x66
_MAX_DIGITS = 20

# Plain notation is used within these decimal exponents, scientific outside
# (Oracle's own range is 1E-130 .. 9.99...E+125, too long to print plainly).
_PLAIN_MIN_EXP = -30
_PLAIN_MAX_EXP = 40
_EXACT = Context(prec=64)


def decode_number(b: bytes) -> str:
    """Decode Oracle's internal NUMBER format to exact decimal text.

    Parameters
    ----------
    b : bytes
        The column bytes as a block dump prints them after ``col n: [len]``
        (``c1 02`` is 1, ``c2 02`` is 100, ``3e 64 66`` is -1, ``80`` is 0).

    Returns
    -------
    str
        The value, e.g. ``"123.45"``, ``"-1"``, ``"1E-130"``.

    Raises
    ------
    ValueError
        When ``b`` is not a valid NUMBER encoding.
    """
    if not b:
        raise ValueError("empty NUMBER")
    if b == _ZERO:
        return "0"
    head = b[0]
    if head > 0x80:
        exponent = head - 0xC1
        raw = b[1:]
        if not raw or len(raw) > _MAX_DIGITS or any(not 1 <= d <= 100 for d in raw):
            raise ValueError(f"not a positive NUMBER: {b.hex(' ')}")
        digits = [d - 1 for d in raw]
        sign = 0
    elif head < 0x80:
        exponent = 0x3E - head
        raw = b[1:]
        if raw and raw[-1] == _NEG_TERMINATOR:
            raw = raw[:-1]
        elif len(raw) != _MAX_DIGITS:
            # Only a full 20-digit mantissa may omit the terminator.
            raise ValueError(f"negative NUMBER without 0x66 terminator: {b.hex(' ')}")
        if not raw or len(raw) > _MAX_DIGITS or any(not 1 <= d <= 101 for d in raw):
            raise ValueError(f"not a negative NUMBER: {b.hex(' ')}")
        digits = [101 - d for d in raw]
        sign = 1
    else:
        # 0x80 followed by digits: the smallest exponent (e = -65), e.g. 1E-130.
        exponent = -65
        raw = b[1:]
        if len(raw) > _MAX_DIGITS or any(not 1 <= d <= 100 for d in raw):
            raise ValueError(f"not a NUMBER: {b.hex(' ')}")
        digits = [d - 1 for d in raw]
        sign = 0
    dec_digits: list[int] = []
    for d in digits:
        dec_digits.extend((d // 10, d % 10))
    # The first base-100 digit is worth 100**exponent; each pair of decimal
    # digits we emitted is one base-100 place.
    exp10 = 2 * (exponent - (len(digits) - 1))
    # normalize() under a wide context: the default 28-digit one would round
    # a full 40-digit mantissa.
    value = Decimal((sign, tuple(dec_digits), exp10)).normalize(_EXACT)
    return _format_decimal(value)


def try_decode_number(b: bytes) -> str | None:
    """:func:`decode_number`, or None when ``b`` is not a valid NUMBER."""
    try:
        return decode_number(b)
    except ValueError:
        return None


def _format_decimal(value: Decimal) -> str:
    if value.is_zero():
        return "0"
    adjusted = value.adjusted()
    if _PLAIN_MIN_EXP <= adjusted <= _PLAIN_MAX_EXP:
        return format(value, "f")
    return format(value, "E")


def decode_varchar2(b: bytes, encoding: str = "utf-8") -> str:
    """Character data (VARCHAR2/CHAR) as text; undecodable bytes become U+FFFD.

    ``encoding`` is the database character set's Python name (AL32UTF8 is
    ``"utf-8"``, WE8MSWIN1252 is ``"cp1252"``).
    """
    return b.decode(encoding, errors="replace")


def guess_column(b: bytes | None) -> str:
    """A display value for column bytes whose type is unknown.

    Printable text is shown quoted, a valid NUMBER as its value, bytes that
    are both as ``'>df' or NUMBER -1``, anything else as hex; ``None`` (a NULL
    column) as ``NULL``. It is a guess: ``c1 02`` is the NUMBER 1, but could
    in principle be RAW bytes.
    """
    if b is None:
        return "NULL"
    text = None
    if b:
        try:
            text = b.decode("utf-8")
        except UnicodeDecodeError:
            pass
        if text is not None and not text.isprintable():
            text = None
    number = try_decode_number(b)
    if text is not None and number is not None:
        # e.g. 3e 64 66 is both '>df' and -1: say both rather than pick one.
        return f"{text!r} or NUMBER {number}"
    if text is not None:
        return repr(text)
    if number is not None:
        return number
    return "0x" + b.hex()
