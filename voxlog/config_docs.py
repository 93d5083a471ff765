"""Every setting, once per variable, under its group, with the processes that read it and its default.

Several processes read the same variable (each has one settings class, and the
classes share field groups); the table lists the variable once. Where a
process gives it another default or meaning, the row says so.

A variable's group is that of the settings class that declares it (``foundation.settings.group_of``; the first
process to read it decides when several declare it). ``voxlog config`` prints, and ``voxlog docs`` writes into
docs/configuration.md, how many settings there are, each group with how many it holds and why they are
settings, then one table per group, in ``foundation.settings.GROUPS``' order.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from foundation.settings import ALL_SETTINGS, GROUPS, Group, group_of


@dataclass(frozen=True)
class SettingRow:
    variable: str
    processes: tuple[str, ...]
    default: str
    meaning: str
    group: Group


class UngroupedSetting(ValueError):
    """A field declared in a settings class that names no group."""


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
    groups: dict[str, Group] = {}
    for cls in ALL_SETTINGS:
        prefix = str(cls.model_config.get("env_prefix", ""))
        for name, field in cls.model_fields.items():
            variable = f"{prefix}{name}".upper()
            group = group_of(cls, name)
            if group is None:
                raise UngroupedSetting(f"{cls.__name__}.{name} is declared in a class without a group")
            groups.setdefault(variable, group)
            seen.setdefault(variable, []).append((cls.process, _default(field), field.description or ""))
    return [_row(variable, readers, groups[variable]) for variable, readers in seen.items()]


def _row(variable: str, readers: list[tuple[str, str, str]], group: Group) -> SettingRow:
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
    return SettingRow(variable, processes, default_text, meaning, group)


def rows_by_group() -> dict[Group, list[SettingRow]]:
    """Each group that holds a setting, in ``GROUPS``' order, with its rows."""
    rows = settings_rows()
    return {group: held for group in GROUPS if (held := [row for row in rows if row.group == group])}


def settings_table() -> str:
    """What ``voxlog config`` prints and docs/configuration.md shows: the count, the groups, a table per group."""
    grouped = rows_by_group()
    total = sum(len(rows) for rows in grouped.values())
    lines = [
        f"voxlog has **{total} settings** in {len(grouped)} groups: each group, how many it holds, and why they"
        " are settings (what differs between deployments).",
        "",
        "| group | settings | why they are settings |",
        "|---|---|---|",
    ]
    lines += [f"| {group.title} | {len(rows)} | {group.why} |" for group, rows in grouped.items()]
    for group, rows in grouped.items():
        lines += ["", f"## {group.title}", "", "| variable | read by | default | meaning |", "|---|---|---|---|"]
        lines += [f"| `{row.variable}` | {', '.join(row.processes)} | {row.default} | {row.meaning} |" for row in rows]
    return "\n".join(lines)
