"""Importers: real session files and hook-event logs → the hook events their hooks emit.

:mod:`streams.importers.files` recognises a file's format and dispatches to the importer.
"""
