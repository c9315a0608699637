"""Typed user errors. Each carries one clear sentence; the CLI prints it and exits 2."""

__all__ = ["SDSLError", "InvalidInputError", "UnknownNameError", "ConfigError", "ProfileError"]


class SDSLError(Exception):
    """Base class of every error sdsl raises for bad input or bad files."""


class InvalidInputError(SDSLError, ValueError):
    """A numeric argument is outside its domain (α ∉ (0, 1), γ < 0, batch <= 0, ...)."""


class UnknownNameError(SDSLError, LookupError):
    """A model or hardware name that no catalog holds."""


class ConfigError(SDSLError):
    """A missing, unreadable or malformed input file (config.json, TOML, JSON)."""


class ProfileError(ConfigError):
    """A malformed or truncated profile file; the message names the file and row."""
