"""Every relative link of the README, data/README.md and docs/ names a file that exists (sections moved into docs/
keep their links working from there) and, where it names a section (#anchor), a heading of that file; every page of
docs/ is reached from the README."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "data" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def local_links(page):
    """(path, anchor) of each link of `page` within the repository (no web or mail address); path "" for a section
    of the page itself, anchor "" for a whole file."""
    return [tuple(target.split("#", 1)) if "#" in target else (target, "")
            for target in LINK.findall(page.read_text()) if not re.match(r"^(https?:|mailto:)", target)]


def anchors(page):
    """The anchors of a page's headings, as GitHub makes them: lower case, punctuation dropped, spaces as hyphens."""
    return {re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
            for title in re.findall(r"^#+ (.+)$", page.read_text(), re.M)}


def test_every_relative_link_names_a_file_that_exists():
    missing = [f"{page.relative_to(ROOT)} -> {path}" for page in PAGES for path, _ in local_links(page)
               if path and not (page.parent / path).exists()]
    assert not missing, "links to nothing: " + "; ".join(missing)


def test_every_link_to_a_section_names_a_heading_of_its_page():
    missing = []
    for page in PAGES:
        for path, anchor in local_links(page):
            linked = page.parent / path if path else page
            if anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                missing.append(f"{page.relative_to(ROOT)} -> {path}#{anchor}")
    assert not missing, "links to no heading: " + "; ".join(missing)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / path).resolve() for path, _ in local_links(ROOT / "README.md") if path}
    pages = set((ROOT / "docs").glob("*.md"))
    assert pages, "docs/ has no pages"
    assert not {page.resolve() for page in pages} - linked
