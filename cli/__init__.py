"""The ``stabkit`` command line (installed as the package ``stabkit_cli``)."""
