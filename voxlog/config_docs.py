"""Every setting of every process, with its environment variable and default."""

from __future__ import annotations

from pydantic_core import PydanticUndefined

from foundation.settings import ALL_SETTINGS


def settings_rows() -> list[tuple[str, str, str, str]]:
    """(process class, variable, default, description) for every field."""
    rows = []
    for cls in ALL_SETTINGS:
        prefix = cls.model_config.get("env_prefix", "")
        for name, field in cls.model_fields.items():
            if field.default_factory is not None:
                default = "see meaning"
            elif field.default is PydanticUndefined:
                default = "required"
            else:
                default = repr(field.default) if field.default is not None else "unset"
            rows.append((cls.__name__, f"{prefix}{name}".upper(), default, field.description or ""))
    return rows


def settings_table() -> str:
    lines = ["| settings | variable | default | meaning |", "|---|---|---|---|"]
    lines += [f"| {cls} | `{var}` | `{default}` | {desc} |" for cls, var, default, desc in settings_rows()]
    return "\n".join(lines)
