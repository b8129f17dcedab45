"""hivestream: event-sourced stream processing for AI-agent memory (CLI and embedded runner)."""

__version__ = "0.1.0"
