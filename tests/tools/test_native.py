"""Native read-only tools: confinement to the workspace, secrets, binary and large files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from boocode.tools.native import Deadline, ToolTimeoutError, grep, list_dir, view_file
from boocode.tools.workspace import WorkspaceConfigError, WorkspaceError, workspace_root
from mcpclient.core.results import MAX_OUTPUT_BYTES


@pytest.fixture
def project(workspace: Path) -> Path:
    """A small project inside the workspace."""
    (workspace / "src" / "pkg").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("import os\n\ndef main():\n    return 'hello'\n")
    (workspace / "src" / "pkg" / "util.py").write_text("def helper():\n    return 'HELLO'\n")
    (workspace / "README.md").write_text("# Demo\nSay hello.\n")
    return workspace


# --- the workspace root ------------------------------------------------------------------


def test_root_is_created_empty_on_first_use(workspace):
    assert not workspace.exists()
    assert workspace_root() == workspace.resolve()
    assert workspace.is_dir() and list(workspace.iterdir()) == []


@pytest.mark.parametrize("which", ["BASE_DIR", "DATA_DIR"])
def test_root_equal_to_or_containing_project_or_data_dir_is_refused(settings, which):
    target = Path(getattr(settings, which))
    for root in (target, target.parent):
        settings.WORKSPACE = root
        with pytest.raises(WorkspaceConfigError, match="BOOCODE_WORKSPACE"):
            workspace_root()


def test_unsafe_root_is_reported_by_the_tool_not_raised(settings, tmp_path):
    settings.WORKSPACE = settings.DATA_DIR
    with pytest.raises(WorkspaceConfigError, match="is the data directory"):
        view_file("mcp.json")


# --- traversal and symlinks --------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["../outside/secret.txt", "src/../../outside/secret.txt", "..", "/etc/passwd", "{outside}/secret.txt"],
)
def test_paths_escaping_the_root_are_refused(project, outside, path):
    path = path.format(outside=outside)
    for call in (lambda: view_file(path), lambda: list_dir(path), lambda: grep("secret", path)):
        with pytest.raises(WorkspaceError, match="outside the workspace"):
            call()


def test_absolute_path_inside_the_root_is_allowed(project):
    assert "hello" in view_file(str(project / "src" / "app.py"))


def test_dotdot_that_stays_inside_is_allowed(project):
    assert "HELLO" in view_file("src/../src/pkg/util.py")


def test_symlink_pointing_out_is_refused(project, outside):
    (project / "leak.txt").symlink_to(outside / "secret.txt")
    (project / "leakdir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WorkspaceError, match="symbolic link leads outside"):
        view_file("leak.txt")
    with pytest.raises(WorkspaceError, match="symbolic link leads outside"):
        view_file("leakdir/secret.txt")
    with pytest.raises(WorkspaceError, match="symbolic link leads outside"):
        list_dir("leakdir")
    assert "top secret" not in grep("secret")  # the walk neither follows nor reads them
    listing = list_dir(".")
    assert "leak.txt@" in listing and "leakdir@" in listing


def test_symlink_inside_the_root_is_followed(project):
    (project / "alias.py").symlink_to(project / "src" / "app.py")
    assert "return 'hello'" in view_file("alias.py")


# --- secrets -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", [".env", ".env.local", "server.pem", "deploy.key", "db.sqlite3", ".git/config", "sub/.ENV"]
)
def test_secrets_are_never_served_even_inside_the_root(project, name):
    path = project / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("hello PASSWORD=hunter2\n")
    with pytest.raises(WorkspaceError, match="deny list"):
        view_file(name)
    assert grep("hunter2") == "No matches for 'hunter2' in ."
    assert name.split("/")[-1] not in list_dir(".", depth=3)


def test_symlink_to_a_secret_is_refused(project):
    (project / ".env").write_text("TOKEN=abc\n")
    (project / "notes.txt").symlink_to(project / ".env")
    with pytest.raises(WorkspaceError, match="deny list"):
        view_file("notes.txt")
    assert grep("TOKEN") == "No matches for 'TOKEN' in ."


def test_deny_list_is_configurable(settings, project):
    settings.WORKSPACE_DENY = ["*.md", "src/pkg/*"]
    with pytest.raises(WorkspaceError, match=r"\*\.md"):
        view_file("README.md")
    with pytest.raises(WorkspaceError, match="src/pkg"):
        view_file("src/pkg/util.py")
    assert "hello" in view_file("src/app.py")
    settings.WORKSPACE_DENY = []
    (project / ".env").write_text("A=1\n")
    assert "A=1" in view_file(".env")


# --- view_file ---------------------------------------------------------------------------


def test_view_file_numbers_lines_and_honours_the_range(project):
    assert view_file("src/app.py") == (
        "     1\timport os\n     2\t\n     3\tdef main():\n     4\t    return 'hello'"
    )
    assert view_file("src/app.py", start_line=3, end_line=3) == "     3\tdef main():"
    assert view_file("src/app.py", start_line=4, end_line=99) == "     4\t    return 'hello'"
    with pytest.raises(WorkspaceError, match=r"past the end of src/app\.py, which has 4 lines"):
        view_file("src/app.py", start_line=5)
    with pytest.raises(WorkspaceError, match="end_line"):
        view_file("src/app.py", start_line=3, end_line=2)


def test_view_file_errors_are_clear(project):
    with pytest.raises(WorkspaceError, match="no such file"):
        view_file("nope.txt")
    with pytest.raises(WorkspaceError, match="is a directory; use list_dir"):
        view_file("src")
    (project / "empty.txt").write_text("")
    assert view_file("empty.txt") == "(empty.txt is empty)"


@pytest.mark.parametrize(
    "content",
    [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", b"text then a NUL\x00 byte", b"\xff\xfe\xfa not utf-8"],
)
def test_binary_files_are_refused(project, content):
    (project / "blob.bin").write_bytes(content)
    with pytest.raises(WorkspaceError, match="binary file"):
        view_file("blob.bin")


def test_utf8_text_with_a_character_cut_by_the_sniff_window_is_text(project):
    text = "a" * 8191 + "é\n"  # the two bytes of é straddle the 8 KB sniff window
    (project / "edge.txt").write_text(text)
    assert view_file("edge.txt").endswith("é")


def test_large_file_is_capped_at_5_mb_with_a_marker(project):
    line = "0123456789" * 10 + "\n"
    lines = (7 * 1024 * 1024) // len(line)
    (project / "big.log").write_text(line * lines)
    output = view_file("big.log")
    body, marker = output.rsplit("\n[truncated", 1)
    assert len(body.encode()) <= MAX_OUTPUT_BYTES
    assert len(output.encode()) < MAX_OUTPUT_BYTES + 300
    cut_at = int(marker.split("at line ")[1].split(":")[0])
    assert 40_000 < cut_at < lines
    assert f"start_line={cut_at}" in marker and str((project / "big.log").stat().st_size) in marker
    # The model can read on from where it was cut.
    assert view_file("big.log", start_line=cut_at, end_line=cut_at).startswith(f"{cut_at:>6}\t0123")


def test_single_huge_line_is_cut_on_a_character_boundary(project):
    (project / "min.js").write_text("é" * (3 * 1024 * 1024))  # 6 MB on one line
    output = view_file("min.js")
    assert "[truncated at line 1" in output
    assert len(output.encode()) < MAX_OUTPUT_BYTES + 300
    output.encode("utf-8")  # no split character


# --- list_dir ----------------------------------------------------------------------------


def test_list_dir_depth_and_order(project):
    assert list_dir() == "README.md\nsrc/"
    assert list_dir(".", depth=3) == "README.md\nsrc/\nsrc/app.py\nsrc/pkg/\nsrc/pkg/util.py"
    assert list_dir("src") == "src/app.py\nsrc/pkg/"
    (project / "void").mkdir()
    assert list_dir("void") == "(void is empty)"
    with pytest.raises(WorkspaceError, match="not a directory"):
        list_dir("README.md")


# --- grep --------------------------------------------------------------------------------


def test_grep_reports_path_line_and_text(project):
    assert grep("hello") == "README.md:2: Say hello.\nsrc/app.py:4:     return 'hello'"
    assert grep("hello", ignore_case=True).count("\n") == 2
    assert grep("hello", path="src", ignore_case=True) == (
        "src/app.py:4:     return 'hello'\nsrc/pkg/util.py:2:     return 'HELLO'"
    )
    assert grep("def", glob="*.py").splitlines() == [
        "src/app.py:3: def main():",
        "src/pkg/util.py:1: def helper():",
    ]
    assert grep("def", glob="src/pkg/*") == "src/pkg/util.py:1: def helper():"
    assert grep("import", path="src/app.py") == "src/app.py:1: import os"
    assert grep("zzz") == "No matches for 'zzz' in ."


def test_grep_limit_bad_regex_and_binary(project):
    (project / "many.txt").write_text("match\n" * 50)
    (project / "blob.bin").write_bytes(b"match\x00match")
    output = grep("match", path="many.txt", max_results=10)
    assert output.count("many.txt:") == 10 and "[stopped after 10 matches" in output
    assert "blob.bin" not in grep("match")
    with pytest.raises(WorkspaceError, match="invalid regular expression"):
        grep("(unclosed")


def test_special_files_are_refused_and_skipped_without_blocking(project):
    os.mkfifo(project / "pipe")  # opening a FIFO for reading would block forever
    with pytest.raises(WorkspaceError, match="not a regular file"):
        view_file("pipe")
    assert grep("hello").splitlines()[0] == "README.md:2: Say hello."
    assert "pipe" in list_dir()


# --- grep: RE2, batches of lines, time limit ----------------------------------------------


def test_grep_lines_are_matched_one_by_one_even_when_searched_in_batches(project):
    (project / "notes.txt").write_text("alpha beta\nbeta\r\ngamma alpha\nend of a\nb starts\n\nlast alpha")
    assert grep("^beta$", path="notes.txt") == "notes.txt:2: beta"  # CRLF line, anchors per line
    assert grep("alpha$", path="notes.txt").splitlines() == [
        "notes.txt:3: gamma alpha",
        "notes.txt:7: last alpha",
    ]
    # \A, \z and ^ outside multi-line mode mean the start or end of each line, never of a batch.
    assert grep(r"\Abeta", path="notes.txt") == "notes.txt:2: beta"
    assert grep(r"gamma alpha\z", path="notes.txt") == "notes.txt:3: gamma alpha"
    assert grep(r"(?-m)^beta", path="notes.txt") == "notes.txt:2: beta"
    assert [line.split(":")[1] for line in grep(r"a\z", path="notes.txt").splitlines()] == [
        "1",
        "2",
        "3",
        "4",
        "7",
    ]
    # Matches that would span two lines of a batch are not matches.
    assert grep(r"a\sb", path="notes.txt") == "notes.txt:1: alpha beta"
    assert grep(r"(?s)of a.b", path="notes.txt") == "No matches for '(?s)of a.b' in notes.txt"
    assert grep("^$", path="notes.txt") == "notes.txt:6: "
    assert grep("ALPHA", path="notes.txt", ignore_case=True).count("\n") == 2
    assert grep("(?i)GAMMA", path="notes.txt") == "notes.txt:3: gamma alpha"


def test_grep_finds_matches_in_every_batch(project):
    lines = [f"line {number}" for number in range(1, 60_001)]  # several batches of 128 KB
    (project / "long.txt").write_text("\n".join(lines) + "\n")
    output = grep(r"^line \d*7777$", path="long.txt")
    assert output.splitlines() == [
        "long.txt:7777: line 7777",
        "long.txt:17777: line 17777",
        "long.txt:27777: line 27777",
        "long.txt:37777: line 37777",
        "long.txt:47777: line 47777",
        "long.txt:57777: line 57777",
    ]


def test_complex_patterns_search_only_the_start_of_very_long_lines(project):
    line = "n" + "x" * 1000 + "e" + "y" * 300_000 + "n" + "z" * 1000 + "e"
    (project / "min.js").write_text(line + "\nn" + "w" * 1000 + "e\n")
    output = grep("n.{1000}e", path="min.js")
    assert output.startswith("min.js:1: nxxx") and "min.js:2: nwww" in output
    assert "[1 lines longer than" in output and "a simpler pattern searches them whole]" in output
    assert "lines longer" not in grep("ze$", path="min.js")  # a simple pattern reads the whole line


def test_each_tool_stops_at_its_deadline(project):
    expired = Deadline.after(0)
    with pytest.raises(ToolTimeoutError, match=r"time limit of 0 s .*BOOCODE_TOOL_TIMEOUT"):
        grep("hello", deadline=expired)
    with pytest.raises(ToolTimeoutError, match="list a subdirectory or use a smaller depth"):
        list_dir(".", deadline=expired)
    with pytest.raises(ToolTimeoutError, match="use grep to find the line"):
        view_file("README.md", deadline=expired)
