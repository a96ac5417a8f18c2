"""The configuration room: what defines a run, validated before anything is built.

``runconfig`` (``RunConfig``: every knob of a paired run with its choices and checks), ``taskoptions``
(``TaskOptions``: the knobs of the task builders), ``presets`` (the papers' settings) and ``fields`` (a config
field that is also a ``stabkit pair`` option, and the type checks of config dataclasses). Nothing here builds
tensors; the engine, the tasks and the run read these objects.
"""
