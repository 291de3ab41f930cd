#!/usr/bin/env python3
"""Check the documentation: links resolve, the README stays short, pages describe the product.

    python hack/check_docs.py [ROOT]      (`make lint` runs it; ROOT defaults to the repository)

Prints one line per finding, `file:line: what`, and exits 1 if there is any.

1. **Links.** Every relative link and image in README.md, docs/**/*.md and charts/**/README.md
   (`[text](target)`, `![alt](target)`, `[name]: target`) names a file or folder that exists. A
   `#anchor` on a Markdown target (or on its own, for the same page) names a heading of that page,
   by GitHub's rule: the heading's text without its Markdown, lower-cased, every character that is
   not a letter, digit, space, hyphen or underscore dropped, spaces turned into hyphens, and `-1`,
   `-2`, ... appended to repeats. Links with a scheme (`https:`, `mailto:`) are not followed. Links
   inside code (fenced blocks and backtick spans) are not links.
2. **The README's length.** README.md is a first screen: at most `README_MAX_WORDS` words, counted
   as `wc -w` counts them (runs of non-blank characters, code included).
3. **Words about how the project was built.** README.md and docs/**/*.md describe the product, not
   the periods of work or the machines rented to do it. Refused, case-insensitive, on word
   boundaries, in prose (code spans and fenced blocks hold product names such as kopf's
   `Session`, pytest's `scope="session"` and Kubernetes' `Lease`, and are skipped):

   - `session(s)`: work periods ("the twenty-ninth session");
   - ordinals from eleventh upward, compounds included ("twenty-ninth", "thirtieth"), which number
     work periods; first to tenth are ordinary English and are not refused;
   - `rent`, `rental(s)`, `rented`, `renting`, `leased`, `lent`, `lending`: machines hired to run
     something. `lease` alone is not refused: it is a Kubernetes object (leader election), and the
     chart's values speak of it;
   - `device minute(s)`, `device-minute(s)`, `GPU minute(s)`, `GPU-minute(s)`, `ledger(s)`: the
     accounting of such machines' time.

   One more pattern applies to code as well: `lease` followed by a number (`comparison_lease3`,
   `lease 2`), the name of a rental, which is never a Kubernetes Lease.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

README_MAX_WORDS = 1800

_ORDINAL_UNITS = "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth"
_TENS = "twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety"
_LARGE_ORDINALS = (
    "eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth"
    "|twentieth|thirtieth|fortieth|fiftieth|sixtieth|seventieth|eightieth|ninetieth|hundredth"
)
REFUSED_IN_PROSE = re.compile(
    r"\b("
    r"sessions?"
    rf"|(?:{_TENS})[- ](?:{_ORDINAL_UNITS})"
    rf"|{_LARGE_ORDINALS}"
    r"|rent|rents|rental|rentals|rented|renting|leased|lent|lending"
    r"|device[- ]minutes?|gpu[- ]minutes?|ledgers?"
    r")\b",
    re.IGNORECASE,
)
REFUSED_ANYWHERE = re.compile(r"(?<![a-z])lease[ _-]?\d+", re.IGNORECASE)

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]+(?:\([^()\s]*\))?)>?(?:\s+\"[^\"]*\")?\s*\)"
)
_REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


@dataclass(frozen=True)
class Finding:
    path: Path
    line: int
    message: str

    def render(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}:{self.line}: {self.message}"


def _unfenced_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1) == fence:
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        yield number, line


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, the line without its code spans), skipping fenced code blocks."""
    for number, line in _unfenced_lines(text):
        yield number, _CODE_SPAN.sub(" ", line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.replace("`", "")
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"(\*\*|__|\*|_(?=\W|$)|(?<=\W)_|~~)", "", text)  # emphasis markers
    text = text.strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a page offers: its headings' slugs (repeats numbered) and HTML anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _unfenced_lines(text):
        found.update(_HTML_ANCHOR.findall(line))
        heading = _HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def link_targets(text: str) -> Iterator[tuple[int, str]]:
    """(line number, target) of every link outside code."""
    for number, line in prose_lines(text):
        for match in _INLINE_LINK.finditer(line):
            yield number, match.group(1)
        reference = _REFERENCE_LINK.match(line)
        if reference:
            yield number, reference.group(1)


def check_links(path: Path, text: str, root: Path) -> Iterator[Finding]:
    for number, target in link_targets(text):
        if _SCHEME.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        file_part = file_part.split("?", 1)[0]
        if not file_part:
            resolved = path
        elif file_part.startswith("/"):
            resolved = (root / file_part.lstrip("/")).resolve()
        else:
            resolved = (path.parent / file_part).resolve()
        if not resolved.exists():
            yield Finding(path, number, f"broken link: {target} ({file_part} does not exist)")
        elif (
            anchor
            and resolved.suffix == ".md"
            and resolved.is_file()
            and anchor.lower() not in _anchors_of(resolved)
        ):
            yield Finding(path, number, f"broken link: {target} (no heading #{anchor} there)")


def _anchors_of(path: Path) -> set[str]:
    return anchors(path.read_text(encoding="utf-8"))


def check_words(path: Path, text: str) -> Iterator[Finding]:
    for number, line in prose_lines(text):
        for match in REFUSED_IN_PROSE.finditer(line):
            yield Finding(path, number, f"refused word: {match.group(0)}")
    for number, line in enumerate(text.splitlines(), start=1):
        for match in REFUSED_ANYWHERE.finditer(line):
            yield Finding(path, number, f"refused word: {match.group(0)}")


def check_readme_length(path: Path, text: str) -> Iterator[Finding]:
    words = len(text.split())
    if words > README_MAX_WORDS:
        yield Finding(path, 1, f"{words} words, over the README's {README_MAX_WORDS}")


def pages(root: Path) -> tuple[list[Path], list[Path]]:
    """(pages whose links are checked, pages whose words are checked)."""
    readme = [root / "README.md"] if (root / "README.md").is_file() else []
    docs = sorted((root / "docs").rglob("*.md")) if (root / "docs").is_dir() else []
    charts = sorted((root / "charts").rglob("README.md")) if (root / "charts").is_dir() else []
    return readme + docs + charts, readme + docs


def check(root: Path) -> list[Finding]:
    root = root.resolve()
    linked, worded = pages(root)
    findings: list[Finding] = []
    for path in linked:
        text = path.read_text(encoding="utf-8")
        findings.extend(check_links(path, text, root))
        if path in worded:
            findings.extend(check_words(path, text))
        if path == root / "README.md":
            findings.extend(check_readme_length(path, text))
    return findings


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path(__file__).resolve().parents[1]
    findings = check(root)
    for finding in findings:
        print(finding.render(root.resolve()))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
