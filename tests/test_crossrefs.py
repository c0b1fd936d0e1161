"""Cross-references survive reordering the chapters.

The book refers to its own chapters by {doc} links only, whose numbers and titles Sphinx fills in
from ``_toc.yml``. A bare "chapter 6", "ch. 5–7" or "the previous chapter" in the book's text goes
stale the day a chapter moves, so it fails here, unless it names the study's chapters ("the
study's chapter 4", "its chapters 5–7", "the thesis, chapter 5").
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
FENCE = "`" * 3

# "chapter 6", "chapters 6 and 7", "ch. 5–7", "Chs. 4-6"
BARE = re.compile(r"\b(?:[Cc]hapters?|[Cc]hs?\.)\s*\d+(?:\s*(?:[–-]|and|,)\s*\d+)*")
# the book's neighbours, which move with every reordering
RELATIVE = re.compile(r"\b(?:the|this|that)\s+(?:previous|next|preceding|following|last)\s+chapters?\b", re.I)
# words before a bare number that make it the study's chapter, not the book's
STUDY = re.compile(r"(study|thesis|its|seed|paper|dissertation|OpenSIPS study)\W*(?:\w+\W+){0,3}$", re.I)
DOC = re.compile(r"\{doc\}`(?:[^`<]*<)?([^`>]+)>?`")


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc["parts"]:
        files += [c["file"] for c in part["chapters"]]
    return files


def prose(source: str) -> str:
    """The Markdown outside code cells, front matter and comments."""
    source = re.sub(r"\A---\n.*?\n---\n", "", source, flags=re.S)
    source = re.sub(FENCE + r"\{code-cell\}.*?\n" + FENCE, "", source, flags=re.S)
    return re.sub(r"<!--.*?-->", "", source, flags=re.S)


def stale_refs(text: str) -> list[str]:
    """Every bare chapter number not qualified as the study's, and every relative reference."""
    out = []
    for m in BARE.finditer(text):
        before = text[max(0, m.start() - 40):m.start()]
        if not STUDY.search(before):
            out.append(m.group(0))
    out += [m.group(0) for m in RELATIVE.finditer(text)]
    return out


@pytest.mark.parametrize("text", [
    "as chapter 6 showed", "the scheduler delays that chapters 6 and 7 are about", "see ch. 5–7",
    "the previous chapter blamed", "as the next chapter shows", "in the following chapters",
])
def test_a_stale_reference_is_found(text):
    assert stale_refs(text), text


@pytest.mark.parametrize("text", [
    "the study's chapter 4 set-up", "its chapters 5–7 offer", "the thesis (its chapter 4)",
    "{doc}`ch06_many_threads` showed", "Table 5.6 of the study", "the chapter *How to run a load test*",
    "the study's chapters 5–7",
])
def test_a_reference_that_survives_reordering_passes(text):
    assert stale_refs(text) == [], text


@pytest.mark.parametrize("name", toc_files())
def test_no_chapter_number_that_a_reordering_would_make_stale(name):
    source = (ROOT / f"{name}.md").read_text(encoding="utf-8")
    bad = stale_refs(prose(source))
    # text a code cell writes into the page (glued Markdown) moves with the page too
    code = "\n".join(re.findall(FENCE + r"\{code-cell\}[^\n]*\n(.*?)" + FENCE, source, flags=re.S))
    bad += [m.group(0) for m in RELATIVE.finditer(code)]
    assert not bad, f"{name}.md: {bad} (link the chapter with {{doc}} instead)"


@pytest.mark.parametrize("name", toc_files())
def test_every_doc_link_names_a_page_of_the_book(name):
    here = (ROOT / f"{name}.md").parent
    files = {str((ROOT / f).resolve()) for f in toc_files()}
    for target in DOC.findall((ROOT / f"{name}.md").read_text(encoding="utf-8")):
        path = (here / target.strip()).resolve() if not target.startswith("/") else (ROOT / target[1:]).resolve()
        assert str(path.with_suffix("")) in files or str(path) in files, f"{name}.md links {target!r}"
