"""``--price-profile NAME|FILE``: a built-in price profile by name, or one read from TOML.

A TOML profile has the fields of ``analytics.jobs.prices.PriceProfile`` (``name``, ``caching``,
the four prices per million tokens, and optionally ``currency``, ``ttl_seconds``,
``min_prefix_tokens``, ``granularity_tokens``, ``models``, ``taken_on``, ``source``, ``note``);
it is validated with pydantic and a bad one is refused naming the file, the field and the
value. The profiles themselves and the cache rules live in ``analytics.jobs``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError

from analytics.errors import AnalyticsError
from analytics.jobs.prices import BUILTIN_PROFILES, PriceProfile


class PriceProfileError(AnalyticsError, ValueError):
    """A ``--price-profile`` that is neither a built-in name nor a valid TOML profile."""


def resolve_profile(value: str) -> PriceProfile:
    """The built-in profile named ``value``, else the TOML profile at path ``value``."""
    if value in BUILTIN_PROFILES:
        return BUILTIN_PROFILES[value]
    path = Path(value)
    if not path.is_file():
        raise PriceProfileError(
            f"price profile {value!r} is neither a built-in profile "
            f"({', '.join(BUILTIN_PROFILES)}) nor a TOML file: name one of those or give the "
            "path of a profile file"
        )
    return load_profile(path)


def load_profile(path: Path) -> PriceProfile:
    """A ``PriceProfile`` from the TOML file at ``path`` (``name`` defaults to the file stem)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PriceProfileError(f"{path}: cannot read the price profile: {exc.strerror}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PriceProfileError(f"{path}: not a TOML price profile: {exc}") from None
    data.setdefault("name", path.stem)
    try:
        return PriceProfile.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors()[:3]:
            field = ".".join(str(part) for part in error["loc"]) or "(profile)"
            shown = data.get(str(error["loc"][0])) if error["loc"] else None
            problems.append(f"{field} = {shown!r}: {error['msg']}")
        raise PriceProfileError(
            f"{path}: {'; '.join(problems)}; a profile needs caching ('explicit', 'automatic' "
            "or 'none') and input, cache_read, cache_write, output prices per million tokens, "
            "each a number >= 0"
        ) from None
