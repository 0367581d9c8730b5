"""Which skills a fleet night takes (fleet/members.py): one skill folder is an ordinary night, a
folder of skill folders or several folders a fleet, and `--skills-from claude` finds the skills
where Claude Code loads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.errors import BadInput
from optimizer.fleet.members import claude_skills, folder_names, folders


def skill(path: Path, name: str | None = None) -> Path:
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(f"---\nname: {name or path.name}\ndescription: d\n---\nDo it.\n")
    return path


def test_one_skill_folder_is_an_ordinary_night_and_a_folder_of_them_a_fleet(tmp_path):
    one = skill(tmp_path / "one")
    assert folders([one], None, home=tmp_path, here=tmp_path) is None
    skill(tmp_path / "all" / "b")
    skill(tmp_path / "all" / "a")
    (tmp_path / "all" / "notes").mkdir()  # no SKILL.md: not a member
    found = folders([tmp_path / "all"], None, home=tmp_path, here=tmp_path)
    assert [p.name for p in found or []] == ["a", "b"]
    several = folders([one, tmp_path / "all" / "a"], None, home=tmp_path, here=tmp_path)
    assert several == [one, tmp_path / "all" / "a"]


def test_a_folder_without_any_skill_is_refused_in_one_sentence(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match=r"empty: holds no SKILL.md, and no folder inside it does"):
        folders([tmp_path / "empty"], None, home=tmp_path, here=tmp_path)
    with pytest.raises(BadInput, match=r"--skills-from 'cursor': use one of claude"):
        folders([], "cursor", home=tmp_path, here=tmp_path)


def test_skills_from_claude_reads_the_users_the_projects_and_each_plugins(tmp_path):
    home, here = tmp_path / "home", tmp_path / "repo"
    skill(home / ".claude" / "skills" / "mine")
    skill(here / ".claude" / "skills" / "project")
    skill(home / ".claude" / "plugins" / "market" / "tool" / "skills" / "plugged")
    found = claude_skills(home, here)
    assert [p.name for p in found] == ["mine", "project", "plugged"]
    with pytest.raises(BadInput, match=r"--skills-from claude: no skill in"):
        folders([], "claude", home=tmp_path / "nobody", here=tmp_path / "nowhere")


def test_two_skills_of_one_name_get_folders_of_their_own():
    assert folder_names(["a", "b", "a", "a"]) == ["a", "b", "a-2", "a-3"]
