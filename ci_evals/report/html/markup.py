"""HTML text for the run site: escaping, the page shell and its style.

Everything an agent, a reviewer or a results file wrote is data: it reaches
the page only through `esc` (HTML-escaped, control and bidi characters made
visible). As a second wall, every page forbids scripts outright: its
Content-Security-Policy allows inline style and nothing else, so even markup
that slipped through could not run. Folding is `<details>`, which needs no
script.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from datetime import datetime, timezone

from ci_evals.report import printable

# No script, frame, form, font, connection or remote image: a page that works
# from a downloaded artifact and cannot be made to run anything.
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)
# Bidi overrides and isolates reorder what a reader sees (a file name that reads
# "txt.exe" backwards); zero-width characters hide text. Shown as escapes.
_HIDDEN = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")

STYLE = """
:root { color-scheme: light dark; --ok: #1a7f37; --bad: #cf222e; --err: #9a6700;
  --muted: #656d76; --line: #d0d7de; --code: rgba(127,127,127,.12); }
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 72rem; padding: 1rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; } h3 { font-size: 1rem; }
table { border-collapse: collapse; margin: .5rem 0; }
th, td { border: 1px solid var(--line); padding: .25rem .5rem; text-align: left;
  vertical-align: top; }
th { background: var(--code); }
td { white-space: nowrap; } td.reason { white-space: normal; min-width: 24rem; }
td code { white-space: normal; overflow-wrap: anywhere; }  /* a long path may break, a word not */
code, pre { font: 12px/1.4 ui-monospace, monospace; background: var(--code); }
pre { padding: .5rem; overflow-x: auto; white-space: pre-wrap; word-break: break-all;
  margin: .25rem 0; }
.status { font-weight: 600; } .passed, .completed { color: var(--ok); }
.failed, .limit, .failure { color: var(--bad); }
.error, .pending, .running, .skipped, .interrupted { color: var(--err); }
.muted { color: var(--muted); } .note { border-left: 4px solid var(--err); padding-left: .5rem; }
.event { border-left: 3px solid var(--line); margin: .25rem 0; padding: .1rem .5rem; }
.event.assistant { border-color: #0969da; } .event.tool-result { border-color: #8250df; }
.event.result { border-color: var(--ok); } .event.is-error { border-color: var(--bad); }
.depth-1 { margin-left: 2rem; } .depth-2 { margin-left: 4rem; } .depth-3 { margin-left: 6rem; }
.meta { color: var(--muted); font-size: 12px; }
.diff-add { color: var(--ok); } .diff-del { color: var(--bad); } .diff-hunk { color: #0969da; }
details > summary { cursor: pointer; }
nav a { margin-right: 1rem; }
"""


def esc(value: object) -> str:
    """`value` as HTML text: escaped (quotes too, so also safe in an attribute),
    control, bidi and zero-width characters written as visible escapes."""
    text = printable(str(value))
    text = _HIDDEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return html.escape(text, quote=True)


def shell_start(title: str, *, nav: Iterable[tuple[str, str]] = (), note: str = "") -> str:
    """The page up to the start of its content. `nav`: (href, label) of our own pages;
    `note`: the run's origin note (`caveat`), shown under it."""
    links = "".join(f'<a href="{esc(href)}">{esc(label)}</a>' for href, label in nav)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>"
        + (f"<nav>{links}</nav>" if links else "")
        + caveat(note)
    )


SHELL_END = "</body></html>\n"


def status(word: str, css: str | None = None) -> str:
    """A status word, coloured by its class (our own words only)."""
    return f'<span class="status {_css(css or word)}">{esc(word)}</span>'


def _css(word: str) -> str:
    return re.sub(r"[^a-z-]", "", word.split(":", maxsplit=1)[0].lower()) or "muted"


def table(head: Iterable[str], rows: Iterable[Iterable[str]], *, wide: int | None = None) -> str:
    """A table; `head` is plain text, each cell of `rows` already HTML. Cells do not
    wrap (a status or a cost split over two lines reads as two values) except those
    of column `wide` (a reason, a rationale): it takes the room the others leave."""
    top = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="reason">{c}</td>' if i == wide else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{top}</tr></thead><tbody>{body}</tbody></table>"


def pre(text: str) -> str:
    return f"<pre>{esc(text)}</pre>"


def fold(summary_html: str, body_html: str, *, open_: bool = False) -> str:
    flag = " open" if open_ else ""
    return f"<details{flag}><summary>{summary_html}</summary>{body_html}</details>"


def clip(text: str, limit: int) -> tuple[str, int]:
    """(at most `limit` characters of `text`, how many were left out)."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def clipped_pre(text: str, limit: int) -> str:
    shown, left = clip(text, limit)
    more = f'<div class="meta">… {left:,} more characters not shown</div>' if left else ""
    return pre(shown) + more


def money(value: float | None) -> str:
    """Dollars to the cent; a cost under half a cent is not shown as nothing spent."""
    if value is None:
        return "-"
    if 0 < value < 0.005:
        return "<$0.01"
    return f"${value:,.2f}"


def seconds(value: float | None) -> str:
    """A duration to the second: `45 s`, `2 min 05 s`, `1 h 02 min`."""
    if value is None:
        return "-"
    whole = round(value)
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def moment(value: datetime | None) -> str:
    """A point in time to the second, in UTC: `2026-03-04 05:06:07 UTC`."""
    if value is None:
        return "-"
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc)
    return value.strftime("%Y-%m-%d %H:%M:%S") + " UTC"


def caveat(note: str) -> str:
    """The run's origin note (a stub or a replay: no fresh model's verdict), as every
    page shows it: a reader who lands on a stage page from a link must see it too."""
    return f'<div class="note caveat"><p><b>{esc(note)}</b></p></div>' if note else ""
