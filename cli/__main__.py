"""``python -m stabkit_cli`` runs the ``stabkit`` command."""
from stabkit_cli.main import main

main()
