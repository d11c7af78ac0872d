"""Every ```python block of docs/python.md runs, each on its own, in an empty directory.

The examples state what they show with assert, so an example whose output changed fails
here as surely as one that raises. Blocks of other languages (```sh) are not run.
"""

import pathlib
import re

import pytest

DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "python.md"

# A fence opening at the start of a line with the language "python", up to the next fence.
BLOCK = re.compile(r"^```python\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def python_blocks(text):
    """(line number, source) of each python block of `text`."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in BLOCK.finditer(text)]


BLOCKS = python_blocks(DOC.read_text(encoding="utf-8"))


def test_the_page_has_its_examples():
    # A fence spelled differently (```py, an indented fence) would silently drop a block
    # from the run: count every fence that opens a block against the python ones found.
    assert len(BLOCKS) >= 9  # the page has nine today
    openers = re.findall(r"^```(\S*)", DOC.read_text(encoding="utf-8"), re.MULTILINE)
    languages = openers[0::2]  # every other fence opens a block
    assert set(languages) <= {"python", "sh"}, languages
    assert languages.count("python") == len(BLOCKS)


def test_the_extractor_finds_blocks_and_their_lines():
    text = "intro\n```python\nx = 1\n```\n\n```sh\nls\n```\n```python\ny = 2\n```\n"
    assert python_blocks(text) == [(2, "x = 1\n"), (9, "y = 2\n")]


@pytest.mark.parametrize("line, source", BLOCKS, ids=[f"line{line}" for line, _ in BLOCKS])
def test_example(line, source, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # Blank lines in front so that a traceback names the page's own line numbers.
    code = compile("\n" * line + source, str(DOC), "exec")
    exec(code, {"__name__": f"docs_python_md_line{line}"})
