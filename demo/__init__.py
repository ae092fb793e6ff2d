"""The demo bundle (CC0): see README.md in this folder."""
