"""What one lowering runs with, built once by keyword: the target, the format dialect (SPEC 9) and
each optional feature's setting, from the keyword options the features declare (`lowering.features`).

`lower_sources`, `run_sources` and the command line all build their `Options` here, so an option is
declared once, in its feature, and never restated along the way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from metadata.errors import DprintfError
from metadata.formats import C_DIALECT

from .features import FEATURES, Feature
from .targets.target import Target, get_target


class OptionError(DprintfError, TypeError):
    """A keyword option that no feature declares."""


@dataclass(frozen=True)
class Options:
    """The target, the format dialect, and the setting of each feature that is on (by feature name)."""

    target: Target
    dialect: str = C_DIALECT
    settings: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, target: str | Target = "cpu", dialect: str = C_DIALECT, **values: Any) -> Options:
        """The options of `target` and `dialect` with the features' keyword `values` (the defaults for
        those not given); OptionError naming a keyword that no feature takes."""
        known = {
            option.keyword: option for feature in FEATURES for option in feature.options if option.lowers
        }
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise OptionError(f"unknown lowering option(s): {', '.join(unknown)} (known: {', '.join(known)})")
        given = {keyword: values.get(keyword, option.default) for keyword, option in known.items()}
        settings = {
            feature.name: setting for feature in FEATURES if (setting := feature.setting(given)) is not None
        }
        return cls(get_target(target), dialect, settings)

    def setting(self, name: str) -> Any | None:
        """The setting of the feature called `name`, None when it is off."""
        return self.settings.get(name)

    def enabled(self) -> list[tuple[Feature, Any]]:
        """The features that are on, in registry order, with their settings."""
        return [
            (feature, self.settings[feature.name]) for feature in FEATURES if feature.name in self.settings
        ]

    @property
    def counts_executions(self) -> bool:
        """Whether an enabled feature counts how often code runs (so no pass may run code twice)."""
        return any(feature.counts_executions for feature, _ in self.enabled())
