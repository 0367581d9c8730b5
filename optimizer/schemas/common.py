"""What every seed model shares: the JSON types of a document no model has checked yet, and the
three bases (an input file's, a seed output's, our own files' exact shape)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

# A JSON document as parsed (json.loads) or about to be written, before a model has checked it:
# what a user's file or edit, a request's body or a JSON column holds.
Json = str | int | float | bool | None | list["Json"] | Mapping[str, "Json"]
JsonObject = Mapping[str, Json]


class InputModel(BaseModel):
    # A typo in an input file would otherwise silently drop a check or a setting.
    model_config = ConfigDict(extra="forbid")


class OutputModel(BaseModel):
    """Output may add fields, never rename one: extras pass, known misnamings do not."""

    model_config = ConfigDict(extra="allow")
    # wrong name -> seed name, for names the seeds warn about or that a writer slips into
    misnamed: ClassVar[dict[str, str]] = {}
    # seed fields whose null is meaningful: kept even when a writer dumps with exclude_none
    keep_null: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _keep_null(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if not isinstance(out, dict):
            return out
        gone = [n for n in self.keep_null if n not in out]
        if not gone:
            return out
        order = (*type(self).model_fields, *out)
        return {k: out.get(k) for k in order if k in out or k in gone}

    @model_validator(mode="before")
    @classmethod
    def _no_misnamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and cls.misnamed:
            found = {k: cls.misnamed[k] for k in data if k in cls.misnamed}
            if found:
                listed = ", ".join(f"'{w}' should be '{r}'" for w, r in found.items())
                raise PydanticCustomError(
                    "misnamed_field",
                    "misnamed field(s): {listed}",
                    {"listed": listed, "found": found},
                )
        return data


class ExactModel(BaseModel):
    """Our own files (not seed files): the model is the exact shape written, so a field added to a
    writer without its model fails before writing."""

    model_config = ConfigDict(extra="forbid")
