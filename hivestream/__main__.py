"""``python -m hivestream`` runs the CLI; ``python -m hivestream hook ...`` takes the command hook's
fast path (no typer, no DuckDB), as the installed ``hivestream hook`` does (:mod:`hivestream.cli.app`)."""

import sys

if sys.argv[1:2] == ["hook"]:
    from hivestream.hooks.command import main as _hook_main

    sys.exit(_hook_main(sys.argv[2:]))

from hivestream.cli.app import main

main()
