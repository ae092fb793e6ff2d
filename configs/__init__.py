"""Packaged configs (TOML): `clearmed config --list`."""
