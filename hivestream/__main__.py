"""``python -m hivestream`` runs the CLI."""

from hivestream.cli.app import main

main()
