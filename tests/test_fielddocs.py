"""infragen.fielddocs attaches attribute docstrings on demand, as pydantic's use_attribute_docstrings would."""

from __future__ import annotations

from pydantic import BaseModel, Field

from infragen.fielddocs import document


class _Inner(BaseModel):
    depth_m: float = 1.0
    """Depth in metres."""


class _Base(BaseModel):
    name: str
    """The name."""
    note: str = Field("", description="set explicitly")
    """Ignored: the explicit description wins."""


class _Outer(_Base):
    inner: _Inner | None = None
    """The inner part."""
    items: list[_Inner] = []
    undocumented: int = 0


def test_descriptions_are_absent_until_asked() -> None:
    class Late(BaseModel):
        size: int = 0
        """A size."""

    assert Late.model_fields["size"].description is None


def test_document_attaches_docstrings_of_the_model_its_bases_and_inner_models() -> None:
    document(_Outer)
    fields = _Outer.model_fields
    assert fields["name"].description == "The name."
    assert fields["note"].description == "set explicitly"
    assert fields["inner"].description == "The inner part."
    assert fields["undocumented"].description is None
    assert _Inner.model_fields["depth_m"].description == "Depth in metres."
    schema = _Outer.model_json_schema()
    assert schema["properties"]["name"]["description"] == "The name."
    assert schema["$defs"]["_Inner"]["properties"]["depth_m"]["description"] == "Depth in metres."
    assert document(_Outer) is _Outer  # idempotent
