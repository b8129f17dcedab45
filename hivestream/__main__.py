"""``python -m hivestream`` runs the CLI."""

from hivestream.cli import main

main()
