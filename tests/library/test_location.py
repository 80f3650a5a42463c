"""Where the library lives: SPECPLAN_DB_URL, else the user's data directory."""

from __future__ import annotations

from pathlib import Path

from library.location import configured_url, shown_url


def test_default_is_a_file_under_the_user_data_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("SPECPLAN_DB_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert configured_url() == f"sqlite:///{tmp_path / 'xdg' / 'specplan' / 'library.db'}"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    expected = Path(tmp_path / "home" / ".local" / "share" / "specplan" / "library.db")
    assert configured_url() == f"sqlite:///{expected}"


def test_the_environment_overrides_and_can_switch_it_off(monkeypatch):
    monkeypatch.setenv("SPECPLAN_DB_URL", "postgresql+psycopg://team:s3cret@db/specplan")
    assert configured_url() == "postgresql+psycopg://team:s3cret@db/specplan"
    assert "s3cret" not in shown_url(configured_url())
    monkeypatch.setenv("SPECPLAN_DB_URL", "off")
    assert configured_url() is None
