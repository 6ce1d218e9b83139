"""The README is executable: every fenced shell and Python block of README.md runs, as written, in
order, and a block that fails fails this test (issue 23).  The blocks are read from README.md at
test time (markdown-it, the parser rich already depends on), so the test cannot drift from the
text.

What runs and what does not, by the block's language:

* ``sh``/``bash``: run by bash (``set -e -o pipefail``: any failing command fails the block),
  in a new session whose process group is killed afterwards, so that a background server
  (``ddms serve-feed ... &``) never outlives its block;
* ``python``: run by this interpreter as a script;
* ``text``, ``sql``, ``m3``, ``json``: not run (output, listings, synopses).  A block after an
  ``<!-- file: PATH -->`` comment must equal that file, so a listing cannot drift from the file
  the commands run;
* a fence with no language, or an unknown one, is an error: every block says what it is.

Excluded: the two set-up commands (section "Set up on a fresh machine": ``pip install -e .`` and
``pip install -e '.[test]' && pytest``).  CI itself runs the second (``.ci/run``) and installing
ddms again from inside the test suite would replace the installation under test.

Where: a scratch directory laid out like a checkout next to its ``shared`` folder --
``<tmp>/repo`` holds links to the checkout's files outside the Python packages (``examples/``,
``README.md``, ...; folders are real folders of links, so that a path like
``examples/sql/../../data`` stays in the scratch directory).  The packages come from
``PYTHONPATH`` instead, so that numba's cache, keyed by source path, is shared with the other
tests.  ``<tmp>/shared`` links to ``../shared`` when it exists.  Commands run with
``<tmp>/repo`` as their working directory, so what the README writes (``data/``, ``sweep/``,
``usdm.parquet``, ``orders.csv``) lands there, and ``ddms`` on ``PATH`` is this checkout's
(``python -m ddms``).  The data comes from the README's own first Use block (``ddms sample-data
data``).  Blocks naming ``../shared`` (this repository's test data) are skipped where it is
absent; any other failure fails.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, SHARED
from markdown_it import MarkdownIt

pytestmark = pytest.mark.long(150)   # minutes in CI: scheduled first (tests/conftest.py)

README = REPO / "README.md"
SHELL = ("sh", "bash")
PYTHON = ("python",)
NOT_RUN = ("text", "sql", "m3", "json")
SETUP_SECTION = "Set up on a fresh machine"
TIMEOUT = 900           # seconds per block

_FILE_MARK = re.compile(r"<!--\s*file:\s*(\S+)\s*-->")
_SHARED = re.compile(r"\.\./shared/")
_DDMS_CMD = re.compile(r"(?:^|[;&|(]\s*|\$\(\s*)ddms\s+([a-z][\w-]*)", re.M)


@dataclass(frozen=True)
class Block:
    """One fenced block: its 1-based first line, language, text, the section it is in and the
    file an ``<!-- file: PATH -->`` comment right before it names (None: none)."""

    line: int
    lang: str
    text: str
    section: str
    file: str | None

    @property
    def runs(self) -> bool:
        return self.lang in SHELL + PYTHON and self.section != SETUP_SECTION

    @property
    def id(self) -> str:
        return f"L{self.line}-{self.lang}"


def parse_blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown text, in order."""
    tokens = MarkdownIt().parse(text)
    blocks: list[Block] = []
    section, mark = "", None
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            section = tokens[i + 1].content.strip()
        elif t.type == "html_block":
            m = _FILE_MARK.search(t.content)
            mark = m.group(1) if m else None
            continue
        elif t.type == "fence":
            blocks.append(Block(t.map[0] + 1, t.info.strip().split(" ")[0], t.content, section, mark))
        mark = None
    return blocks


BLOCKS = parse_blocks(README.read_text())


def _commands() -> set[str]:
    import argparse

    from ddms.cli import build_parser
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


# ------------------------------------------------------------------------------------------
# the text
# ------------------------------------------------------------------------------------------

def test_every_block_says_what_it_is():
    assert BLOCKS, "README.md has no fenced block"
    for b in BLOCKS:
        assert b.lang in SHELL + PYTHON + NOT_RUN, f"README.md:{b.line}: fence language {b.lang!r} is not one " \
                                                   f"of {SHELL + PYTHON + NOT_RUN}"
    assert [b for b in BLOCKS if b.runs], "no runnable block"
    setup = [b for b in BLOCKS if b.section == SETUP_SECTION]
    assert len(setup) == 1 and setup[0].text.count("pip install") == 2      # the two excluded commands


def test_listings_equal_their_files():
    listed = [b for b in BLOCKS if b.file]
    assert listed, "the SQL example is a listing of examples/sql/vwap.sql"
    for b in listed:
        assert (REPO / b.file).read_text() == b.text, f"README.md:{b.line}: the block differs from {b.file}"


def test_commands_exist():
    """Every ``ddms X`` the README runs is a command."""
    known = _commands()
    for b in BLOCKS:
        if b.lang in SHELL:
            for cmd in _DDMS_CMD.findall(b.text):
                assert cmd in known, f"README.md:{b.line}: `ddms {cmd}` is not a ddms command"


# ------------------------------------------------------------------------------------------
# running it
# ------------------------------------------------------------------------------------------

_SKIP_LINKS = {".git", "data", "build", "dist", "sweep"}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> dict:
    return make_scratch(tmp_path_factory.mktemp("readme"))


def make_scratch(root: Path) -> dict:
    """Lay out ``root`` as described in the module docstring; the state the blocks share."""
    repo = root / "repo"
    repo.mkdir()
    for entry in REPO.iterdir():
        if entry.name.startswith(".") or entry.name in _SKIP_LINKS or entry.name.endswith(".egg-info") \
                or (entry / "__init__.py").exists():
            continue
        if entry.is_dir():      # real folders of file links: `examples/sql/../../data` stays in the scratch
            shutil.copytree(entry, repo / entry.name, ignore=shutil.ignore_patterns("__pycache__"),
                            copy_function=lambda src, dst: os.symlink(os.path.abspath(src), dst))
        else:
            (repo / entry.name).symlink_to(entry)
    if SHARED.exists():
        (root / "shared").symlink_to(SHARED)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "ddms"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ddms "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "COLUMNS": "100"}
    return {"root": root, "repo": repo, "env": env, "scripts": root / "scripts"}


def _skip_reason(b: Block) -> str | None:
    if _SHARED.search(b.text) and not SHARED.exists():
        return f"needs this repository's test data ({SHARED}), absent here"
    return None


def _run_block(b: Block, state: dict) -> subprocess.CompletedProcess:
    scripts = state["scripts"]
    scripts.mkdir(exist_ok=True)
    if b.lang in SHELL:
        script = scripts / f"{b.id}.sh"
        script.write_text("set -e -o pipefail\n" + b.text)
        argv = ["bash", str(script)]
    else:
        script = scripts / f"{b.id}.py"
        script.write_text(b.text)
        argv = [sys.executable, str(script)]
    p = subprocess.Popen(argv, cwd=state["repo"], env=state["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        out, err = "", f"timed out after {TIMEOUT} s"
        p.returncode = -1
    finally:
        _kill_group(p.pid)
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def _kill_group(pgid: int) -> None:
    """End what the block left running (a background server), politely first."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.runs], ids=lambda b: b.id)
def test_readme_block_runs(block: Block, scratch: dict):
    reason = _skip_reason(block)
    if reason:
        pytest.skip(reason)
    r = _run_block(block, scratch)
    assert r.returncode == 0, (f"README.md:{block.line} ({block.lang} block) failed with exit {r.returncode}:\n"
                               f"{block.text}\n--- stdout (end) ---\n{r.stdout[-3000:]}\n"
                               f"--- stderr (end) ---\n{r.stderr[-3000:]}")
