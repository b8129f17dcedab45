"""``python -m hivestream`` runs the CLI."""

from hivestream.cli import app

app()
