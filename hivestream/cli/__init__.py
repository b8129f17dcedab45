"""The ``hivestream`` command, one module per command group (:mod:`.app` is the entry point).
"""
