"""Fill the README's generated tables from results/, or check that they are current.

    python scripts/readme_results.py            # rewrite every generated block in README.md
    python scripts/readme_results.py --check    # exit 1, with a diff, if any block is stale

A generated block is everything between a line ``<!-- results: python scripts/NAME.py ARGS -->`` and the next
``<!-- /results -->``. Its body is exactly what that table script prints (from results/<paper>/), so a table
in the README can only say what the committed CSVs say: merge new rows, run this, and the README follows.
The test suite runs ``--check``, so a merge that forgets the README fails CI instead of leaving stale numbers.

A number in the prose can be generated too: ``<!-- value: python scripts/NAME.py ARGS -->TEXT<!-- /value -->``
inside a line (a comment is invisible once rendered) has TEXT replaced by the one line the command prints, e.g.
``python scripts/gma_table.py --value diff 2 0.01``. Prose numbers without such a marker are written by hand and
are not checked; keep them few.

Each script runs once per distinct command, in this process (one torch import in all).
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import re
import runpy
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN = re.compile(r"^<!-- results: (?P<cmd>.+?) -->$")
END = "<!-- /results -->"
VALUE = re.compile(r"<!-- value: (?P<cmd>.+?) -->(?P<text>.*?)<!-- /value -->")


class BlockError(ValueError):
    """A marker the tool cannot act on: names the line and what is allowed."""


def blocks(lines: list[str]) -> list[tuple[int, int, str]]:
    """(index of the begin marker, index of its end marker, command) for every generated block, in order."""
    found, open_at = [], None
    for i, line in enumerate(lines):
        m = BEGIN.match(line)
        if m:
            if open_at is not None:
                raise BlockError(f"line {i + 1}: a results block begins inside the one opened at line "
                                 f"{open_at[0] + 1}; close that one with {END!r} first")
            open_at = (i, m["cmd"])
        elif line == END:
            if open_at is None:
                raise BlockError(f"line {i + 1}: {END!r} without a '<!-- results: ... -->' above it")
            found.append((open_at[0], i, open_at[1]))
            open_at = None
    if open_at is not None:
        raise BlockError(f"line {open_at[0] + 1}: the results block '{open_at[1]}' is never closed with {END!r}")
    return found


def script_of(cmd: str, root: Path = ROOT) -> tuple[Path, list[str]]:
    """The table script a marker names and its arguments; only ``python scripts/<name>.py ...`` is allowed."""
    words = shlex.split(cmd)
    if len(words) < 2 or words[0] != "python" or not re.fullmatch(r"scripts/[A-Za-z0-9_]+\.py", words[1]):
        raise BlockError(f"results marker command {cmd!r}: expected 'python scripts/<name>.py [args]'")
    path = root / words[1]
    if not path.is_file():
        raise BlockError(f"results marker command {cmd!r}: {words[1]} does not exist")
    return path, words[2:]


def run_script(cmd: str, root: Path = ROOT) -> str:
    """What ``cmd`` prints, run in this process with its own argv; a script that exits non-zero is an error."""
    path, args = script_of(cmd, root)
    out, argv = io.StringIO(), sys.argv
    sys.argv = [str(path), *args]
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise BlockError(f"results marker command {cmd!r} failed: {e.code}") from None
    finally:
        sys.argv = argv
    return out.getvalue().strip("\n")


def fill_values(line: str, number: int, cache: dict, changed: list, root: Path) -> str:
    """``line`` with the text of each inline value marker replaced by what its command prints (one line)."""
    if "<!-- value:" in line and line.count("<!-- value:") != line.count("<!-- /value -->"):
        raise BlockError(f"line {number}: each '<!-- value: ... -->' needs its '<!-- /value -->' on the same line")

    def one(m: re.Match) -> str:
        cmd = m["cmd"]
        if cmd not in cache:
            cache[cmd] = run_script(cmd, root).split("\n")
        if len(cache[cmd]) != 1:
            raise BlockError(f"line {number}: value marker command {cmd!r} printed {len(cache[cmd])} lines; a value "
                             "is one line (use a results block for a table)")
        if m["text"] != cache[cmd][0]:
            changed.append(cmd)
        return f"<!-- value: {cmd} -->{cache[cmd][0]}<!-- /value -->"
    return VALUE.sub(one, line)


def render(text: str, root: Path = ROOT) -> tuple[str, list[str]]:
    """The text with every generated block and inline value refilled, and the commands whose output changed."""
    lines = text.split("\n")
    cache: dict[str, list[str]] = {}
    out, last, changed = [], 0, []
    prose = lambda a, b: [fill_values(lines[i], i + 1, cache, changed, root) for i in range(a, b)]
    for begin, end, cmd in blocks(lines):
        if cmd not in cache:
            cache[cmd] = run_script(cmd, root).split("\n")
        out += prose(last, begin) + [lines[begin]] + cache[cmd]
        if lines[begin + 1:end] != cache[cmd]:
            changed.append(cmd)
        last = end
    out += prose(last, len(lines))
    return "\n".join(out), changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", default=str(ROOT / "README.md"), help="the markdown file (default: README.md)")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 and show a diff if a block is stale")
    a = ap.parse_args(argv)
    path = Path(a.file)
    text = path.read_text()
    try:
        new, changed = render(text)
    except BlockError as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 2
    n = len(blocks(text.split("\n"))) + len(VALUE.findall(text))
    if not changed:
        print(f"{path}: all {n} generated blocks and values match results/")
        return 0
    if a.check:
        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True), str(path),
                                                   f"{path} (from results/)"))
        print(f"\n{path}: {len(changed)} of {n} generated blocks and values are stale "
              f"({'; '.join(dict.fromkeys(changed))}); run python scripts/readme_results.py", file=sys.stderr)
        return 1
    from fltutor.checkpoint import atomic_write_text
    atomic_write_text(path, new)
    print(f"{path}: refilled {len(changed)} of {n} generated blocks and values "
          f"({'; '.join(dict.fromkeys(changed))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
