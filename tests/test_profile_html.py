"""`--html` (SPEC section 10): one self-contained page, read by a real browser. Headless Chromium
(Debian's `chromium`) dumps the page's DOM, whose tables must hold every count of the text report, and
takes a screenshot, which must show the shaded lines and the lines never entered."""

import os
import subprocess
import zlib
from html.parser import HTMLParser

import numpy as np
import pytest
from profile_tables import (
    BIG_COUNTS,
    COUNTS,
    HEADER,
    HEADER_TEXT,
    KERNEL,
    KERNEL_TEXT,
    TABLE,
    parse_table,
    sections,
)

from metadata.instrumentation.profile import Profile
from metadata.instrumentation.profile_html import HEAT_COLOURS, NEVER_COLOUR, html_page

CHROMIUM = "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is not installed")


class PageText(HTMLParser):
    """The text of a page and its tables (a row a `<tr>`, a cell a `<td>`/`<th>`), without `<style>`."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tables: list[list[list[str]]] = []
        self.hrefs: list[str] = []
        self._cell: list[str] | None = None
        self._skip = False
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        if tag == "style":
            self._skip = True
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        for name, value in attrs:
            if name in ("href", "src"):
                self.hrefs.append(value)

    def handle_endtag(self, tag):
        if tag == "style":
            self._skip = False
        elif tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._skip:
            return
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def table(self, first_head: str) -> list[list[str]]:
        (found,) = [table for table in self.tables if table and table[0] and table[0][0] == first_head]
        return found


def listings(profile: Profile):
    return [profile.source_listing(KERNEL, KERNEL_TEXT), profile.source_listing(HEADER, HEADER_TEXT)]


def chromium(*arguments: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={cwd / 'profile'}",
            *arguments,
        ],
        capture_output=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    profile = Profile(TABLE, COUNTS)
    folder = tmp_path_factory.mktemp("page")
    path = folder / "profile & <page>.html"
    path.write_text(html_page(profile, listings(profile)), encoding="utf-8")
    return profile, path


def png_pixels(data: bytes) -> np.ndarray:
    """The RGB pixels of an 8-bit RGB or RGBA PNG, non-interlaced (as Chromium writes its screenshots)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, chunks = 8, {}
    while offset < len(data):
        length = int.from_bytes(data[offset : offset + 4], "big")
        kind = data[offset + 4 : offset + 8]
        chunks.setdefault(kind, []).append(data[offset + 8 : offset + 8 + length])
        offset += 12 + length
    header = chunks[b"IHDR"][0]
    width, height = int.from_bytes(header[:4], "big"), int.from_bytes(header[4:8], "big")
    depth, colour, interlace = header[8], header[9], header[12]
    assert (depth, colour, interlace) in ((8, 2, 0), (8, 6, 0))
    channels = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(chunks[b"IDAT"])), dtype=np.uint8)
    raw = raw.reshape(height, 1 + width * channels)
    image = np.zeros((height, width * channels), dtype=np.int32)
    previous = np.zeros(width * channels, dtype=np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if kind == 0:
            row = line
        elif kind == 1:  # Sub: a running sum along each channel
            row = np.cumsum(line.reshape(width, channels), axis=0).reshape(-1) % 256
        elif kind == 2:  # Up
            row = (line + previous) % 256
        else:  # Average, Paeth: each byte needs the one decoded before it
            row = np.zeros_like(line)
            for x in range(len(line)):
                left = row[x - channels] if x >= channels else 0
                up, up_left = previous[x], (previous[x - channels] if x >= channels else 0)
                if kind == 3:
                    row[x] = (line[x] + (left + up) // 2) % 256
                else:
                    estimate = left + up - up_left
                    pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - up_left)
                    guess = left if pa <= pb and pa <= pc else up if pb <= pc else up_left
                    row[x] = (line[x] + guess) % 256
        image[y], previous = row, row
    return image.reshape(height, width, channels)[:, :, :3]


def pixels_of(image: np.ndarray, colour: str) -> int:
    rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
    return int(np.count_nonzero(np.all(np.abs(image - rgb) <= 2, axis=2)))


def check_page_holds_the_report(page: PageText, profile: Profile) -> None:
    """The page's tables hold the report's tables cell for cell, its listings the annotated margins."""
    part = sections(profile.report())
    summary, totals = list(part.values())[:2]
    assert summary[0] in "".join(page.text)
    assert page.table("metric") == parse_table(totals, 1, also_left=(2,))
    assert page.table("block") == parse_table(part["blocks, hottest first"][1:], 4)
    lines = parse_table(part["source lines, hottest first"][1:], 1)
    assert [row[:1] + row[2:] for row in page.table("source")] == lines  # the page adds each line's blocks
    never = part["never entered"]
    text = " ".join(" ".join(page.text).split())
    assert never[0].replace("never", "Never") in text
    for row in never[1:]:
        assert " ".join(row.split()) in text
    tables = [table for table in page.tables if table and table[0] and table[0][0] == "line"]
    for listing, table in zip(listings(profile), tables, strict=True):
        margins = [line.split("|") for line in listing.annotated().splitlines()]
        assert [row[:3] for row in table[1:]] == [[cell.strip() for cell in row[:3]] for row in margins[1:]]
        assert [row[-1] for row in table[1:]] == [row[-1] for row in margins[1:]]


def test_page_is_self_contained_and_escaped():
    profile = Profile(TABLE, BIG_COUNTS)
    text = html_page(profile, listings(profile))
    page = PageText(text)
    assert all(href.startswith("#") for href in page.hrefs) and page.hrefs
    for outside in ("<script", "<link", "<img", "@import", "url(", "http:", "https:"):
        assert outside not in text
    assert "lib/fast&amp;&lt;math&gt;.h" in text and "<math>" not in text
    assert "if (x &lt; 100.0f &amp;&amp; i != 3)" in text
    check_page_holds_the_report(page, profile)


def test_ir_listing_page():
    profile = Profile(TABLE, COUNTS)
    ir = [
        ("define void @main() {", None),
        ("entry:", 0),
        ("  %c = icmp ult i32 %i, %n ; <&>", 1),
        ("}", None),
    ]
    page = PageText(html_page(profile, [profile.ir_listing(ir, "k<1>.ll")]))
    assert page.table("line") == [
        ["line", "count", "code"],
        ["1", "", "define void @main() {"],
        ["2", "8", "entry:"],
        ["3", "36", "  %c = icmp ult i32 %i, %n ; <&>"],
        ["4", "", "}"],
    ]
    assert "k<1>.ll" in page.text


@needs_chromium
def test_browser_text_holds_every_count_of_the_report(page):
    profile, path = page
    result = chromium("--dump-dom", path.as_uri(), cwd=path.parent)
    assert result.returncode == 0, result.stderr[-2000:]
    dom = PageText(result.stdout.decode())
    check_page_holds_the_report(dom, profile)
    assert (
        "lib/fast&<math>.h" in dom.text
        and "    if (x < 100.0f && i != 3) x = fast_fma(x, 2.0f, 1.0f);" in dom.text
    )


@needs_chromium
def test_browser_screenshot_shows_the_shading(page):
    _, path = page
    picture = path.parent / "screenshot.png"
    result = chromium(f"--screenshot={picture}", "--window-size=1400,900", path.as_uri(), cwd=path.parent)
    assert result.returncode == 0, result.stderr[-2000:]
    image = png_pixels(picture.read_bytes())
    assert image.shape == (900, 1400, 3)
    hottest, never = pixels_of(image, HEAT_COLOURS[-1]), pixels_of(image, NEVER_COLOUR)
    # the hottest lines (5 and 6 of the kernel, over the listing's width, and the hottest blocks)
    assert hottest > 2 * 600 * 15, hottest
    assert never > 600 * 15, never  # line 7, the blocks never entered
    assert pixels_of(image, HEAT_COLOURS[0]) > 600 * 15  # the coolest lines
