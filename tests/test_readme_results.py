"""scripts/readme_results.py: the README's generated tables equal what the table scripts print from results/."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from fltutor import results

ROOT = Path(__file__).resolve().parent.parent
rr = results.load_script("readme_results")


def test_the_committed_readme_matches_results():
    """The real check: a merge into results/ that leaves the README behind fails here, with the command to run."""
    text = (ROOT / "README.md").read_text()
    assert len(rr.blocks(text.split("\n"))) >= 8
    new, changed = rr.render(text)
    assert not changed, f"stale README blocks {changed}: run python scripts/readme_results.py"
    assert new == text


@pytest.fixture
def tree(tmp_path):
    """A checkout in miniature: a table script that prints its arguments, and one that fails."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "echo_table.py").write_text(
        "import sys\nprint('| a | b |')\nprint('|---|---|')\nprint('| ' + ' | '.join(sys.argv[1:]) + ' |')\n")
    (tmp_path / "scripts" / "broken_table.py").write_text("raise SystemExit('no results/x/y.csv yet')\n")
    return tmp_path


def doc(body: str, cmd: str = "python scripts/echo_table.py 1 2") -> str:
    return f"# title\n\nprose before\n\n<!-- results: {cmd} -->\n{body}\n<!-- /results -->\n\nprose after\n"


def test_render_refills_only_the_block_and_is_idempotent(tree):
    new, changed = rr.render(doc("| old | table |"), tree)
    assert changed == ["python scripts/echo_table.py 1 2"]
    assert new == doc("| a | b |\n|---|---|\n| 1 | 2 |")      # prose before and after untouched
    again, changed = rr.render(new, tree)
    assert again == new and changed == []


def test_two_blocks_with_one_command_run_it_once(tree, monkeypatch):
    calls = []
    real = rr.run_script
    monkeypatch.setattr(rr, "run_script", lambda cmd, root: calls.append(cmd) or real(cmd, root))
    text = doc("x") + doc("y")
    new, changed = rr.render(text, tree)
    assert len(calls) == 1 and len(changed) == 2
    assert new.count("| 1 | 2 |") == 2


@pytest.mark.parametrize("text, words", [
    ("<!-- results: python scripts/echo_table.py -->\nbody\n", "never closed"),
    ("body\n<!-- /results -->\n", "without a"),
    ("<!-- results: python scripts/echo_table.py -->\n<!-- results: python scripts/echo_table.py -->\n"
     "<!-- /results -->\n", "begins inside"),
    (doc("x", "bash scripts/echo_table.py"), "expected 'python scripts/<name>.py"),
    (doc("x", "python ../echo_table.py"), "expected 'python scripts/<name>.py"),
    (doc("x", "python scripts/missing_table.py"), "does not exist"),
    (doc("x", "python scripts/broken_table.py"), "failed: no results/x/y.csv yet"),
])
def test_bad_markers_name_the_line_or_command(tree, text, words):
    with pytest.raises(rr.BlockError, match=re.escape(words)):
        rr.render(text, tree)


def test_check_reports_a_stale_block_and_writes_nothing(tmp_path, capsys):
    """Against a real table script: --check exits 1 with a diff and leaves the file; a plain run refills it."""
    readme = tmp_path / "README.md"
    cmd = "python scripts/privacy_table.py mnist"
    readme.write_text(doc("| stale | numbers |", cmd))
    before = readme.read_text()
    assert rr.main(["--file", str(readme), "--check"]) == 1
    out, err = capsys.readouterr()
    assert "-| stale | numbers |" in out and "1 of 1 generated blocks are stale" in err
    assert readme.read_text() == before
    assert rr.main(["--file", str(readme)]) == 0
    assert "| stale" not in readme.read_text()
    assert rr.main(["--file", str(readme), "--check"]) == 0
    assert "all 1 generated blocks match" in capsys.readouterr().out


def test_a_broken_marker_exits_2(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- results: python scripts/privacy_table.py mnist -->\nno end\n")
    assert rr.main(["--file", str(readme), "--check"]) == 2
    assert "never closed" in capsys.readouterr().err
