"""What the pages say, checked through ``streamlit.testing`` on the fixture store (issue 27,
item 5): no page names a command-line flag where it has a button, counts agree with their
nouns ("1 emergency", never "1 emergencies"), and the words behind them on their own.
"""

from __future__ import annotations

import pytest

from analytics import fix_words
from app.words import APP_NOT_COMPUTED, fix_text, plural
from tests.app.fixtures import FixtureHome
from tests.app.pages import open_page, plural_slips, session_with, shown


@pytest.mark.parametrize(
    ("n", "word", "many", "said"),
    [
        (1, "session", None, "1 session"),
        (2, "session", None, "2 sessions"),
        (0, "session", None, "0 sessions"),
        (1, "emergency", "emergencies", "1 emergency"),
        (1_200, "emergency", "emergencies", "1,200 emergencies"),
    ],
)
def test_plural_agrees_with_its_count(n: int, word: str, many: str | None, said: str) -> None:
    assert plural(n, word, many) == said


def test_the_app_names_its_button_where_the_command_line_names_a_flag() -> None:
    cli = fix_words({"counterfactual_status": "not computed"})
    assert "--no-counterfactuals" in cli  # what the CLI says, and the app must not

    assert fix_text(cli) == APP_NOT_COMPUTED
    assert "compute counterfactuals" in APP_NOT_COMPUTED and "--" not in APP_NOT_COMPUTED
    assert fix_text("shrink the tail (verified)") == "shrink the tail (verified)"


def test_the_post_mortem_page_names_no_flag_beside_its_own_button(
    fixture_home: FixtureHome,
) -> None:
    sid = session_with(fixture_home, "1af7fc5e")
    at = open_page("emergencies", session=sid)
    if not any("Not computed yet" in i.value for i in at.info):
        pytest.skip("the counterfactuals of this store were computed by an earlier test")

    tables = " ".join(str(d.value.to_dict()) for d in at.dataframe)
    assert "--no-counterfactuals" not in shown(at) + tables
    assert [b.label for b in at.button] == ["compute counterfactuals"]


def test_no_page_says_one_with_a_plural_noun(fixture_home: FixtureHome) -> None:
    assert not plural_slips(fixture_home.sessions)
