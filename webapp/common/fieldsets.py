"""A form's fields in titled groups, rendered by one template loop (``templates/common/_fieldsets.html``).

A form lists its groups once, in ``fieldsets``; the page renders them with
``{% include "common/_fieldsets.html" with field_template="training/_field.html" %}``. A field that no group names
would vanish from the page while the form still expects it, so ``grouped_fields`` refuses a partial list.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.core.exceptions import ImproperlyConfigured


class FieldsetsMixin:
    """Mixed into a ``forms.Form``: ``fieldsets = (("legend", ("field", ...)), ...)``, every field exactly once."""

    fieldsets: ClassVar[tuple[tuple[str, tuple[str, ...]], ...]] = ()
    fields: dict[str, Any]

    def grouped_fields(self) -> list[tuple[str, list[Any]]]:
        listed = [name for _legend, names in self.fieldsets for name in names]
        unknown = [name for name in listed if name not in self.fields]
        missing = [name for name in self.fields if name not in listed]
        repeated = sorted({name for name in listed if listed.count(name) > 1})
        if unknown or missing or repeated:
            problems = {"not fields": unknown, "in no fieldset": missing, "in two fieldsets": repeated}
            raise ImproperlyConfigured(
                f"{type(self).__name__}.fieldsets: "
                + "; ".join(f"{what}: {', '.join(names)}" for what, names in problems.items() if names)
            )
        return [(legend, [self[name] for name in names]) for legend, names in self.fieldsets]  # type: ignore[index]
