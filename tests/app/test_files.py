"""``app.files``: offload paths are served only from inside the offload root."""

from __future__ import annotations

from pathlib import Path

import pytest

from app import files

ROOT = files.OFFLOAD_DIR


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "work" / ROOT / "s1"
    folder.mkdir(parents=True)
    (folder / "call_1.txt").write_text("def f():\n    return 1\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("top secret", encoding="utf-8")
    return tmp_path / "work"


def test_a_recorded_file_resolves(work_dir: Path) -> None:
    path = files.resolve_offload(work_dir, f"{ROOT}/s1/call_1.txt")

    assert files.read_text(path) == ("def f():\n    return 1\n", False)


@pytest.mark.parametrize(
    "relative",
    ["../secret.txt", f"{ROOT}/../../secret.txt", "/etc/passwd", "", f"{ROOT}/s1/..\\..\\x"],
)
def test_dot_dot_and_absolute_paths_are_refused(work_dir: Path, relative: str) -> None:
    with pytest.raises(files.UnsafePathError):
        files.resolve_offload(work_dir, relative)


def test_a_symlinked_file_is_refused(work_dir: Path) -> None:
    (work_dir / ROOT / "s1" / "link.txt").symlink_to(work_dir.parent / "secret.txt")

    with pytest.raises(files.UnsafePathError, match="symbolic link"):
        files.resolve_offload(work_dir, f"{ROOT}/s1/link.txt")


def test_a_symlinked_folder_is_refused(work_dir: Path) -> None:
    (work_dir / ROOT / "evil").symlink_to(work_dir.parent, target_is_directory=True)

    with pytest.raises(files.UnsafePathError, match="symbolic link"):
        files.resolve_offload(work_dir, f"{ROOT}/evil/secret.txt")


def test_a_file_outside_the_offload_folder_is_refused(work_dir: Path) -> None:
    (work_dir / "notes.txt").write_text("x", encoding="utf-8")

    with pytest.raises(files.UnsafePathError, match="outside the offload folder"):
        files.resolve_offload(work_dir, "notes.txt")


def test_a_missing_file_is_not_found_in_any_work_dir(work_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        files.find_offload([tmp_path / "nowhere", work_dir], f"{ROOT}/s1/none.txt")

    found = files.find_offload([tmp_path / "nowhere", work_dir], f"{ROOT}/s1/call_1.txt")
    assert found.name == "call_1.txt"


@pytest.mark.parametrize(
    "name",
    ["a" * 300, "a\x00b", "call_1.txt/x", "call_1.txt/x/y.txt"],
    ids=["ENAMETOOLONG", "NUL", "ENOTDIR", "ENOTDIR-deeper"],
)
def test_a_name_no_file_can_have_is_not_found(work_dir: Path, name: str) -> None:
    with pytest.raises(FileNotFoundError):
        files.resolve_offload(work_dir, f"{ROOT}/s1/{name}")
    with pytest.raises(FileNotFoundError, match="in none of"):
        files.find_offload([work_dir], f"{ROOT}/s1/{name}")


def test_listing_skips_links(work_dir: Path) -> None:
    (work_dir / ROOT / "s1" / "link.txt").symlink_to(work_dir.parent / "secret.txt")

    assert files.listed([work_dir], "s1") == [f"{ROOT.as_posix()}/s1/call_1.txt"]


def test_preview_is_cut_at_the_limit(work_dir: Path) -> None:
    path = work_dir / ROOT / "s1" / "big.log"
    path.write_bytes(b"a" * 50)

    assert files.read_text(path, limit=10) == ("a" * 10, True)


@pytest.mark.parametrize(
    ("name", "text", "language"),
    [
        ("x.py", "", "python"),
        ("call.txt", '{"a": 1}', "json"),
        ("call.txt", "diff --git a/x b/x", "diff"),
        ("call.txt", "import os", "python"),
        ("call.txt", "plain words", None),
        ("page.HTML", "", "html"),
    ],
)
def test_language_is_guessed_from_extension_then_content(
    name: str, text: str, language: str | None
) -> None:
    assert files.language_for(name, text) == language


def test_work_dirs_prefer_the_recorded_root(tmp_path: Path) -> None:
    dirs = files.work_dirs(tmp_path, {"offload_root": "/agents/a"})

    assert dirs == [Path("/agents/a"), tmp_path, tmp_path / "offload"]
