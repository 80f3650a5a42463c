"""The library's tables (SQLAlchemy 2 declarative), as of the newest migration.

One table holds every kind of entry, so listing, searching, renaming and deleting are one
code path; what only one kind has lives in `facts` (JSON) and, for validation runs, in
`validation_figures` (one row per figure, so a figure can be followed over time).
The same schema serves SQLite and PostgreSQL; `migrations/` builds it, never
`create_all`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, deferred, mapped_column, relationship

NAME_CHARS = 200
"""Longest name, in characters: a name is a label in a table, not a document."""
KINDS = ("profile", "benchmark", "scrape", "scenario", "report", "validation", "model")
"""profile: a specplan.profile/v1 file; benchmark: an engine's benchmark result file;
scrape: a vLLM /metrics acceptance scrape; scenario: the state a dashboard link carries;
report: a Reports table with its outputs; validation: a `validate` run's figures; model: a
user's own model, its Hugging Face config.json (and hf_quant_config.json) as given.
A kind is data in `entries.kind`: a new one needs no migration."""


class Base(DeclarativeBase):
    pass


class Entry(Base):
    __tablename__ = "entries"
    __table_args__ = (
        UniqueConstraint("kind", "name", name="uq_entries_kind_name"),
        UniqueConstraint("kind", "content_hash", name="uq_entries_kind_hash"),
        Index("ix_entries_kind_device", "kind", "device"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(NAME_CHARS))
    notes: Mapped[str] = mapped_column(Text, default="")
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    content_hash: Mapped[str] = mapped_column(String(64))
    """sha256 of `content`, hex: the same file saved twice is one entry."""
    size_bytes: Mapped[int] = mapped_column(Integer)
    content: Mapped[bytes] = deferred(mapped_column(LargeBinary))
    """The file as uploaded (profile, benchmark, scrape text) or the entry's JSON."""
    device: Mapped[str] = mapped_column(String(200), default="")
    model: Mapped[str] = mapped_column(String(500), default="")
    engine: Mapped[str] = mapped_column(String(64), default="")
    engine_version: Mapped[str] = mapped_column(String(64), default="")
    model_version: Mapped[str] = mapped_column(String(64), default="")
    """SpecPlan's model version that computed a report's outputs or a validation run."""
    facts: Mapped[dict] = mapped_column(JSON, default=dict)
    """Kind-specific summary: a scrape's parsed rates, a profile's measurement count."""

    figures: Mapped[list[ValidationFigure]] = relationship(
        back_populates="entry", cascade="all, delete-orphan", passive_deletes=True
    )


class ValidationFigure(Base):
    __tablename__ = "validation_figures"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    entry_id: Mapped[int] = mapped_column(
        ForeignKey("entries.id", ondelete="CASCADE", name="fk_figures_entry"), index=True
    )
    metric: Mapped[str] = mapped_column(String(200), index=True)
    """e.g. 'median_abs_error', 'median_abs_error/batch 1-8'."""
    value: Mapped[float] = mapped_column(Float)

    entry: Mapped[Entry] = relationship(back_populates="figures")
