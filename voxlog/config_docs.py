"""Every setting, once per variable, with the processes that read it and its default.

Several processes read the same variable (each has one settings class, and the
classes share field groups); the table lists the variable once. Where a
process gives it another default or meaning, the row says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from foundation.settings import ALL_SETTINGS


@dataclass(frozen=True)
class SettingRow:
    variable: str
    processes: tuple[str, ...]
    default: str
    meaning: str


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        return "see meaning"
    if field.default is PydanticUndefined:
        return "required"
    if field.default is None:
        return "unset"
    # A secret's default is in the code anyway (and has no password): the table shows it as it is.
    default = field.default.get_secret_value() if isinstance(field.default, SecretStr) else field.default
    return repr(default)


def settings_rows() -> list[SettingRow]:
    """One row per variable, in the order the processes first declare them."""
    seen: dict[str, list[tuple[str, str, str]]] = {}
    for cls in ALL_SETTINGS:
        prefix = str(cls.model_config.get("env_prefix", ""))
        for name, field in cls.model_fields.items():
            variable = f"{prefix}{name}".upper()
            seen.setdefault(variable, []).append((cls.process, _default(field), field.description or ""))
    return [_row(variable, readers) for variable, readers in seen.items()]


def _row(variable: str, readers: list[tuple[str, str, str]]) -> SettingRow:
    processes = tuple(process for process, _, _ in readers)
    # The most common (default, meaning) is the variable's; a process that differs is named.
    variants: dict[tuple[str, str], list[str]] = {}
    for process, default, meaning in readers:
        variants.setdefault((default, meaning), []).append(process)
    ((default, meaning), _), *others = sorted(variants.items(), key=lambda item: -len(item[1]))
    default_text = f"`{default}`"
    for (other_default, other_meaning), other_processes in others:
        who = ", ".join(other_processes)
        if other_default != default:
            default_text += f" ({who}: `{other_default}`)"
        if other_meaning != meaning:
            meaning += f" {who}: {other_meaning}"
    return SettingRow(variable, processes, default_text, meaning)


def settings_table() -> str:
    lines = ["| variable | read by | default | meaning |", "|---|---|---|---|"]
    lines += [
        f"| `{row.variable}` | {', '.join(row.processes)} | {row.default} | {row.meaning} |" for row in settings_rows()
    ]
    return "\n".join(lines)
