"""The docs stand alone: every file README.md and docs/*.md link to or name
by path is a file of the project."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

LINK = re.compile(r"\]\(([^)\s]+)\)")                    # [text](target)
NAMED = re.compile(r"`((?:\.\./|\./)?[\w./-]+\.md)`")     # `docs/x.md`, `../x/y.md`


def targets(text):
    for m in LINK.finditer(text):
        target = m.group(1).split("#", 1)[0]
        if target and not re.match(r"[a-z]+:", target):   # not http:, mailto:, an anchor alone
            yield target
    yield from NAMED.findall(text)


def test_every_file_the_docs_name_is_in_the_project():
    missing = []
    for doc in DOCS:
        for target in targets(doc.read_text()):
            # a link is relative to its doc; a path in backticks may be relative to the root
            found = [p for p in ((doc.parent / target).resolve(), (ROOT / target).resolve())
                     if p.is_relative_to(ROOT) and p.exists()]
            if not found:
                missing.append(f"{doc.relative_to(ROOT)}: {target}")
    assert missing == []
