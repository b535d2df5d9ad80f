"""Text that a host or an operator wrote (inventory names and versions, receipt messages,
block reasons, tags), made inert before it is shown.

One function per destination:

- ``plain(value)``: for a terminal or a log. Escape sequences and control characters are
  removed (ECMA-48): CSI sequences such as erase-line (``ESC [ 2 K``), OSC strings such as
  the OSC 52 clipboard write (``ESC ] 52 ; c ; ... BEL``), DCS/SOS/PM/APC strings, the
  other ``ESC`` sequences, the 8-bit C1 forms of all of them, every C0 control but
  newline and tab (BEL, backspace, carriage return...), DEL and the noncharacters
  U+FFFE and U+FFFF; so are the Unicode bidi controls that reorder what a reader sees
  (Trojan Source, CVE-2021-42574).
- ``cell(value)``, ``cells(*values)``: for rich: a ``Text`` of ``plain(value)``, which
  rich never parses for markup (``[/]`` cannot crash a view, ``[link=...]`` cannot make
  a live link).
- ``markup(value)``: ``plain(value)`` escaped for interpolation into imagectl's own rich
  markup (``f"[red]blocked[/] {markup(reason)}"``).
- ``md_cell(value)``: for a GitHub-flavoured Markdown table (the pull-request comment of
  ``imagectl diff --format markdown``): the value as a code span, inside which Markdown
  has no headings, links, images, emphasis or HTML, and GitHub makes no ``@`` mention,
  ``#`` reference, emoji or autolink; pipes are escaped (GFM tables split on them, even
  inside code spans), newlines shown as ``␤``.
- ``xml_text(value)``: for JUnit XML (``--junit``): ``plain(value)`` without what XML 1.0
  cannot carry at all (its ``Char`` production allows only tab, line feed and carriage
  return among C0 controls, and no U+FFFE, U+FFFF or lone surrogate), so a host's text
  never makes the document invalid. ``imagectl.validators.report.junit_document`` applies
  it to every text and attribute of every JUnit document.
- ``prom_label(value)``: for a Prometheus text-format label value: ``plain(value)``
  escaped as the exposition format requires (backslash, double quote, line feed).

Nothing here imports imagectl. A command imports this module inside its body (rich
with it), so that ``--help`` stays light.
"""

from __future__ import annotations

import re

from rich.markup import escape
from rich.text import Text

# ESC-introduced and 8-bit C1 control strings (OSC, DCS, SOS, PM, APC) run to their
# terminator (BEL or ST); an unterminated one to the end, as a terminal would swallow it.
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[\s\S]*?(?:\x07|\x1b\\|\x9c|$)"
_CSI = r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # parameters, intermediates, final byte
_ESC = r"\x1b[ -/]*[0-~]?"  # nF, Fp, Fe and Fs sequences; a lone ESC
_CONTROL = r"[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # C0 but \t and \n; DEL; C1
_BIDI = r"[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
_NONCHAR = r"[\ufffe\uffff]"  # noncharacters: no reader shows them, XML forbids them
_UNSAFE = re.compile("|".join((_STRING, _CSI, _ESC, _CONTROL, _BIDI, _NONCHAR)))


def plain(value: object) -> str:
    """``str(value)`` without escape sequences or control characters (but ``\\n``, ``\\t``)."""
    return _UNSAFE.sub("", value if isinstance(value, str) else str(value))


_NOT_XML = re.compile("[\ud800-\udfff]")  # lone surrogates (plain removes the rest)


def xml_text(value: object) -> str:
    """``plain(value)`` with only characters XML 1.0 allows (see the module docstring)."""
    return _NOT_XML.sub("", plain(value))


def prom_label(value: object) -> str:
    """A Prometheus label value: inert, ``\\``, ``"`` and line feed escaped (the text
    format's three escapes)."""
    text = plain("" if value is None else value).replace("\\", "\\\\").replace('"', '\\"')
    return text.replace("\n", "\\n")


def one_line(value: object) -> str:
    """``plain(value)`` on one line: newlines and tabs as spaces (a table cell, a label)."""
    return " ".join(plain(value).split()) if value is not None else ""


def cell(value: object, style: str = "") -> Text:
    """A rich ``Text`` of ``plain(value)``: printed literally, never parsed as markup."""
    return Text(plain(value), style=style)


def cells(*values: object) -> list[Text]:
    """``cell`` of each value: a table row of data (``table.add_row(*cells(a, b))``)."""
    return [cell(v) for v in values]


def markup(value: object) -> str:
    """``plain(value)`` escaped for rich markup: literal brackets inside a markup string."""
    return escape(plain(value))


def md_cell(value: object) -> str:
    """``value`` as an inert GitHub Markdown table cell (a code span; "" stays empty)."""
    text = plain("" if value is None else value).replace("\t", " ")
    text = text.replace("\r\n", "\n").replace("\n", "␤")
    if not text:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"
