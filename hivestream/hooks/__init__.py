"""The agent side: the command hook (``hivestream hook``), the config merges and installers for
Claude Code, Codex and OpenClaw, the OpenClaw handler template.
"""
