"""MkDocs hooks of the stabkit documentation site.

Two things a plain ``mkdocs.yml`` cannot say:

* the figures live in the repository's ``figures/`` folder (the README shows them too), so they are added to
  the site's files as ``figures/...`` instead of being copied into ``docs/``;
* pages that are written on other branches are reserved in the navigation; an entry whose page is not there
  yet is dropped with a note, so that ``mkdocs build --strict`` passes before and after they arrive. Only the
  names in ``RESERVED`` are treated so: any other missing page still fails the strict build;
* the docstrings are written for Sphinx as well: a role such as :class:`~stabkit.tasks.base.Task` is shown as
  the code it names (``Task``), not as the role's markup;
* a configuration dataclass is shown as a table of its fields (name, type, default, option, meaning), generated
  from the fields themselves where a page says ``<!-- fields: stabkit.config.runconfig.RunConfig -->``.
"""
from __future__ import annotations

import dataclasses
import importlib
import logging
import re
import typing
from pathlib import Path

from mkdocs.structure.files import File

RESERVED = {"flower.md", "privacy.md", "atlas.md", "reliability.md", "performance-engine.md"}
FIGURES = Path(__file__).resolve().parents[1] / "figures"
log = logging.getLogger("mkdocs.hooks.stabkit")
ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc):<code>(~?)([^<]+)</code>")
FIELDS = re.compile(r"<!-- fields: ([\w.]+) -->")


def _kept(entry, docs_dir: Path):
    """``entry`` (a nav item) without the reserved pages that are absent, or None when nothing is left."""
    if isinstance(entry, str):
        missing = entry in RESERVED and not (docs_dir / entry).exists()
        if missing:
            log.info("nav: %s is reserved and not written yet; left out", entry)
        return None if missing else entry
    if isinstance(entry, list):
        kept = [k for k in (_kept(e, docs_dir) for e in entry) if k is not None]
        return kept or None
    (title, target), = entry.items()
    target = _kept(target, docs_dir)
    return None if target is None else {title: target}


def on_config(config):
    """Drop the reserved navigation entries whose pages are absent."""
    if config.nav:
        config.nav = _kept(config.nav, Path(config.docs_dir))
    return config


def on_files(files, config):
    """Add every PNG under ``figures/`` to the site as ``figures/<path>``."""
    for png in sorted(FIGURES.rglob("*.png")):
        files.append(File(f"figures/{png.relative_to(FIGURES).as_posix()}", str(FIGURES.parent),
                          config.site_dir, config.use_directory_urls))
    return files


def _type_text(hint) -> str:
    """``Optional[int]`` as ``int or None``, ``Union[int, str]`` as ``int or str``, a class by its name."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is typing.Union or type(hint).__name__ == "UnionType":
        return " or ".join(_type_text(a) for a in args)
    return "None" if hint is type(None) else getattr(hint, "__name__", str(hint))


def _default_text(f) -> str:
    if f.default_factory is not dataclasses.MISSING:
        made = f.default_factory()
        return f"{type(made).__name__}()" if dataclasses.is_dataclass(made) else repr(made)
    return repr(f.default)


def field_table(path: str) -> str:
    """The Markdown table of the dataclass at ``path`` (``module.Class``): one row per field with its type, default,
    ``stabkit pair`` option and meaning (the field's ``help``, or its ``doc`` when it is no option)."""
    module, name = path.rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    hints = typing.get_type_hints(cls)
    rows = ["| field | type | default | option | meaning |", "|---|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        meta = f.metadata
        option = f"`--{(meta.get('cli_name') or f.name).replace('_', '-')}`" if "help" in meta else meta.get("option", "")
        meaning = (meta.get("help") or meta.get("doc", "")).replace("|", "\\|")
        kind = f"`{_type_text(hints[f.name])}`" + (": one of " + ", ".join(f"`{c}`" for c in meta["choices"])
                                                   if meta.get("choices") else "")
        rows.append(f"| `{f.name}` | {kind} | `{_default_text(f)}` | {option} | {meaning} |")
    return "\n".join(rows)


def on_page_markdown(markdown, page, config, files):
    """Each ``<!-- fields: module.Class -->`` marker replaced by that dataclass's field table."""
    return FIELDS.sub(lambda m: field_table(m[1]), markdown)


def on_page_content(html, page, config, files):
    """Sphinx roles in the rendered docstrings as plain code (``~`` keeps the last name only)."""
    return ROLE.sub(lambda m: f"<code>{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}</code>", html)
