"""A profile as one self-contained HTML page (`--html`): the totals at the top, the annotated listings
with each line shaded by its share of the cost and the lines of blocks never entered in red, the
blocks hottest first beside them, the source lines below. No network, no script: inline CSS only, so
the page reads the same anywhere; block and line names link to their lines in the listing.

Every count of the text report appears in the page's text, written the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from html import escape
from typing import TypeVar

from .profile import (
    NEVER,
    BlockRow,
    Column,
    LineRow,
    Listing,
    ListingLine,
    Profile,
    block_label,
    format_count,
    format_share,
)

# Shading, coolest to hottest: a line's level is its weight's fraction of the hottest line's, in fifths.
HEAT_COLOURS = ("#fff4c2", "#ffe38a", "#ffcc55", "#ffad33", "#ff8c1a")
NEVER_COLOUR = "#f5b5b5"  # the lines and blocks never entered
NEVER_TEXT = "#a00000"
Row = TypeVar("Row", BlockRow, LineRow)  # a row of the block or the line table

_STYLE = f"""
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 16px 20px; color: #1d1d1d; background: #fff; }}
h1 {{ font-size: 20px; margin: 0 0 4px; }}
h2 {{ font-size: 16px; margin: 18px 0 6px; }}
header {{ display: flex; flex-wrap: wrap; gap: 12px 40px; align-items: flex-start; }}
.summary {{ margin: 0 0 8px; }}
table {{ border-collapse: collapse; }}
th, td {{ padding: 1px 6px; text-align: right; white-space: nowrap; vertical-align: top; }}
th {{ font-weight: 600; border-bottom: 1px solid #999; background: #f4f4f4; }}
th.l, td.l {{ text-align: left; }}
td.d {{ color: #555; text-align: left; white-space: normal; }}
.totals td, .totals th {{ padding: 0 8px; }}
code, pre, .listing td, .rows td {{ font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; }}
.listing, .rows {{ font-size: 12.5px; }}
.listing td.code {{ text-align: left; white-space: pre; padding-left: 10px; border-left: 1px solid #ccc; }}
.listing td.m {{ color: #444; }}
main {{ display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 24px; }}
.scroll {{ overflow-x: auto; }}
{"".join(f".h{level} {{ background: {colour}; }}" for level, colour in enumerate(HEAT_COLOURS, 1))}
.never {{ background: {NEVER_COLOUR}; }}
.never td.m:nth-child(2), .never .mark {{ color: {NEVER_TEXT}; font-weight: 700; }}
ul.blocks {{ list-style: none; padding: 0; margin: 0; }}
ul.blocks li {{ padding: 1px 6px; }}
.legend span {{ display: inline-block; padding: 0 8px; margin-right: 2px; border: 1px solid #ccc; }}
tr:target {{ outline: 2px solid #1a5fd0; }}
a {{ color: #1a4fa0; }}
"""


def html_page(profile: Profile, listings: Sequence[Listing]) -> str:
    """The page for `profile`, with `listings` (`Profile.source_listing` for each source file, or
    `Profile.ir_listing` for IR without debug info; may be empty) annotated and shaded."""
    anchors = _anchors(listings)
    hottest = {
        kind: max(
            (line.weight for listing in listings if listing.kind == kind for line in listing.lines), default=0
        )
        for kind in ("source", "ir")
    }
    body = [
        "<header><div>",
        "<h1>Shader instrumentation profile</h1>",
        f'<p class="summary">{escape(profile.summary())}</p>',
        _legend(),
        "</div>",
        _totals(profile),
        "</header>",
        "<main><div>",
        *(_listing(listing, number, profile, hottest) for number, listing in enumerate(listings)),
        "" if listings else "<p>No listing.</p>",
        '</div><aside class="scroll">',
        "<h2>Blocks, hottest first</h2>",
        _block_table(profile, anchors),
        *_never_entered(profile, anchors),
        "</aside></main>",
    ]
    if profile.lines:
        body += [
            "<section>",
            "<h2>Source lines, hottest first</h2>",
            _line_table(profile, anchors),
            "</section>",
        ]
    title = "Profile: " + ", ".join(listing.title for listing in listings) if listings else "Profile"
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def heat_level(weight: int, hottest: int) -> int:
    """The shading level of `weight` (1 to len(HEAT_COLOURS)) against the hottest's; 0 for nothing."""
    if weight <= 0 or hottest <= 0:
        return 0
    return (len(HEAT_COLOURS) * weight + hottest - 1) // hottest


def _row_class(count: int | None, weight: int, hottest: int) -> str:
    if count == 0:
        return ' class="never"'
    level = heat_level(weight, hottest)
    return f' class="h{level}"' if level else ""


def _anchors(listings: Sequence[Listing]) -> dict[object, str]:
    """Link targets: each block's first listing line (key: its index), each source line (key: the
    (file, line) pair)."""
    found: dict[object, str] = {}
    for number, listing in enumerate(listings):
        for line in listing.lines:
            anchor = f"L{number}-{line.number}"
            for index in line.blocks:
                found.setdefault(index, anchor)
            if listing.kind == "source" and line.blocks:
                found.setdefault((listing.title, line.number), anchor)
    return found


def _link(text: str, anchor: str | None) -> str:
    return f'<a href="#{anchor}">{escape(text)}</a>' if anchor else escape(text)


def _legend() -> str:
    swatches = "".join(
        f'<span class="h{level}">{20 * (level - 1)}-{20 * level}%</span>'
        for level in range(1, len(HEAT_COLOURS) + 1)
    )
    return (
        f'<p class="legend">Instructions executed, of the hottest line or block: {swatches} '
        f'<span class="never mark">{NEVER}</span> never entered</p>'
    )


def _totals(profile: Profile) -> str:
    rows = "".join(
        f'<tr><td class="l">{escape(column.name)}</td><td>{format_count(column.total)}</td>'
        f'<td class="d">{escape(column.description)}</td></tr>'
        for column in profile.columns()
    )
    return (
        '<table class="totals"><thead><tr><th class="l">metric</th><th>executed</th>'
        f'<th class="l">description</th></tr></thead><tbody>{rows}</tbody></table>'
    )


def _listing(listing: Listing, number: int, profile: Profile, hottest: dict[str, int]) -> str:
    """A listing as a table, a row a line, shaded against the hottest line of the listings of its kind."""
    source = listing.kind == "source"
    total = sum(profile.instructions(row) for row in profile.blocks)
    heads = ["line", "count", *(["instrs", "%"] if source else [])]
    rows = ["<tr>" + "".join(f"<th>{head}</th>" for head in heads) + '<th class="l">code</th></tr>']
    for line in listing.lines:
        cells = [str(line.number), _count(line)]
        if source:
            has_code = line.instructions is not None
            cells += [format_count(line.weight), format_share(line.weight, total)] if has_code else ["", ""]
        named = ", ".join(f"#{index}" for index in line.blocks)
        blocks = f' title="blocks {named}"' if line.blocks else ""
        shading = _row_class(line.count, line.weight, hottest[listing.kind])
        rows.append(
            f'<tr id="L{number}-{line.number}"{shading}{blocks}>'
            + "".join(f'<td class="m">{cell}</td>' for cell in cells)
            + f'<td class="code">{escape(line.text)}</td></tr>'
        )
    return (
        f"<h2>{escape(listing.title)}</h2>\n"
        f'<div class="scroll"><table class="listing">{"".join(rows)}</table></div>'
    )


def _count(line: ListingLine) -> str:
    if line.count is None:
        return ""
    return NEVER if line.count == 0 else format_count(line.count)


def _metric_heads(columns: Iterable[Column]) -> str:
    return "".join(f"<th>{escape(column.name)}</th><th>%</th>" for column in columns)


def _metric_cells(row: BlockRow | LineRow, columns: Iterable[Column]) -> str:
    return "".join(
        f"<td>{format_count(column.value(row))}</td><td>{format_share(column.value(row), column.total)}</td>"
        for column in columns
    )


def _block_table(profile: Profile, anchors: dict[object, str]) -> str:
    body = _ranked_rows(
        profile,
        profile.hottest_blocks(),
        lambda row: row.count,
        lambda row: (
            f'<td class="l">{_link(f"#{row.block.index}", anchors.get(row.block.index))}</td>'
            f'<td class="l">@{escape(row.block.function)}</td>'
            f'<td class="l">{escape(block_label(row.block))}</td>'
            f'<td class="l">{escape(row.source)}</td>'
        ),
    )
    return (
        '<table class="rows"><thead><tr><th class="l">block</th><th class="l">function</th>'
        f'<th class="l">label</th><th class="l">source</th>{_metric_heads(profile.shown_columns())}'
        "</tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def _line_table(profile: Profile, anchors: dict[object, str]) -> str:
    body = _ranked_rows(
        profile,
        profile.hottest_lines(),
        lambda row: row.entered,
        lambda row: (
            f'<td class="l">{_link(row.source, anchors.get((row.file, row.line)))}</td>'
            f'<td class="l">{escape(", ".join(f"#{index}" for index in row.blocks))}</td>'
        ),
    )
    return (
        '<div class="scroll"><table class="rows"><thead><tr><th class="l">source</th>'
        f'<th class="l">blocks</th>{_metric_heads(profile.shown_columns())}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _ranked_rows(
    profile: Profile,
    rows: Sequence[Row],
    count: Callable[[Row], int | None],
    leading: Callable[[Row], str],
) -> str:
    """A table's rows, hottest first: each row's `leading` cells, then its metrics, shaded by the
    instructions it ran against the hottest row's."""
    columns = profile.shown_columns()
    weights = [profile.instructions(row) for row in rows]
    hottest = max(weights, default=0)
    return "".join(
        f"<tr{_row_class(count(row), weight, hottest)}>{leading(row)}{_metric_cells(row, columns)}</tr>"
        for row, weight in zip(rows, weights, strict=True)
    )


def _never_entered(profile: Profile, anchors: dict[object, str]) -> list[str]:
    title = profile.never_entered_lines()[0]
    never = profile.never_entered()
    items = "".join(
        f'<li class="never"><code>{_link(f"#{row.block.index}", anchors.get(row.block.index))} '
        f"@{escape(row.block.function)} {escape(block_label(row.block))} {escape(row.source)}</code></li>"
        for row in never
    )
    return [
        f"<h2>{escape(title[0].upper() + title[1:])}</h2>",
        f'<ul class="blocks">{items}</ul>' if never else "",
    ]
