"""The faust apps: :mod:`.hooks` reads ``hook-events`` (frames dedup, KnowHub derivation, memory
tool calls), :mod:`.stubs` reads the stub logs. They move bytes between topics; every decision is
made by the pipelines' pure steps.
"""
