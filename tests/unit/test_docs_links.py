"""Every relative link of README.md and docs/*.md leads somewhere: a file that exists and, when the
link names an anchor, a heading of that file with that anchor (GitHub's rule for heading ids)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)


def prose(markdown: str) -> str:
    """The text outside code blocks and code spans (a shell comment is no heading, code no link)."""
    return CODE.sub("", FENCE.sub("", markdown))


def anchor(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in HEADING.findall(prose(page.read_text())):
        base = anchor(heading)
        name, n = base, 0
        while name in found:  # repeated headings get -1, -2, ...
            n += 1
            name = f"{base}-{n}"
        found.add(name)
    return found


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text())) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def broken(page: Path, target: str) -> str | None:
    path, _, fragment = target.partition("#")
    destination = (page.parent / path).resolve() if path else page
    if not destination.exists():
        return f"{page.name}: {target} (no such file)"
    if fragment and destination.suffix == ".md" and fragment not in anchors(destination):
        return f"{page.name}: {target} (no such heading)"
    return None


def test_the_anchor_rule_is_githubs():
    assert anchor("Storage access: remote signing, STS, static keys") == "storage-access-remote-signing-sts-static-keys"
    assert anchor("The first seconds of a worker (W10, 2026-11-24)") == "the-first-seconds-of-a-worker-w10-2026-11-24"
    assert anchor("What the profiles showed, and what changed") == "what-the-profiles-showed-and-what-changed"


def test_every_relative_link_resolves():
    links = {page: relative_links(page) for page in PAGES}
    assert len(PAGES) >= 6 and sum(map(len, links.values())) >= 30  # the pages and their links were read
    assert [problem for page, targets in links.items() for t in targets if (problem := broken(page, t))] == []


def test_every_docs_page_is_linked_from_the_front_page():
    front = {(REPO / t.partition("#")[0]).resolve() for t in relative_links(REPO / "README.md")}
    assert [page.name for page in PAGES[1:] if page not in front] == []


def test_a_broken_link_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## A section\n\n[ok](#a-section) [ok](#title) [no](#b-section) [no](gone.md)\n")
    problems = [broken(page, t) for t in relative_links(page)]
    assert [p is None for p in problems] == [True, True, False, False]
